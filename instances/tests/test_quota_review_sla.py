"""Quota approval "within 30 minutes": staff are alerted, the queue is sorted by the SLA, and the review
page shows the capacity the requests draw on."""

from datetime import timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts.tests.factories import UserFactory
from instances import selectors, services
from instances.models import GpuModel, QuotaRequest, Region
from instances.quota import quota_request_approve, quota_request_create, quota_requests_overdue_escalate
from instances.tasks import quota_requests_overdue_task
from instances.tests.conftest import committed, launch


def _ask(user, gpu="a800-80g", cards=16, days=30, minutes_ago=0):
    request = quota_request_create(
        user=user, gpu_model=GpuModel.objects.get(slug=gpu), cards=cards, duration_days=days, reason="Training"
    )
    if minutes_ago:
        QuotaRequest.objects.filter(pk=request.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
        request.refresh_from_db()
    return request


def test_every_active_staff_member_is_emailed_once_the_request_commits(rich_alice, staff, settings):
    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 45
    other = UserFactory(email="ops@example.com", is_staff=True)
    UserFactory(email="gone@example.com", is_staff=True, is_active=False)
    UserFactory(email="bob@example.com")
    mail.outbox.clear()
    with committed():
        request = _ask(rich_alice, cards=24)
    alerts = [m for m in mail.outbox if "asks for 24" in m.subject]
    assert sorted(m.to[0] for m in alerts) == sorted([staff.email, other.email])
    assert all(len(m.to) == 1 for m in alerts)  # no staff address shown to the others
    assert "alice@example.com" in alerts[0].subject
    assert "within 45 minutes" in alerts[0].body and reverse("quota_review") in alerts[0].body
    assert QuotaRequest.objects.get(pk=request.pk).status == QuotaRequest.Status.PENDING


def test_no_alert_for_a_request_that_is_refused(rich_alice, staff):
    _ask(rich_alice)
    mail.outbox.clear()
    with committed(), pytest.raises(Exception, match="pending request"):
        _ask(rich_alice)
    assert mail.outbox == []


def test_a_mail_server_that_fails_does_not_fail_the_request(rich_alice, staff, settings):
    settings.EMAIL_BACKEND = "instances.tests.test_quota_review_sla.BrokenMail"
    with committed():
        request = _ask(rich_alice)
    assert QuotaRequest.objects.filter(pk=request.pk, status=QuotaRequest.Status.PENDING).exists()


class BrokenMail:
    """An e-mail backend whose server is down."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        raise ConnectionRefusedError("smtp down")

    def __exit__(self, *exc):
        return False

    def send_messages(self, messages):
        raise ConnectionRefusedError("smtp down")


def test_the_staff_menu_counts_waiting_requests_for_staff_only(rich_alice, alice_client, staff, client_for, bob):
    _ask(rich_alice, minutes_ago=5)
    _ask(rich_alice, gpu="h800")
    decided = _ask(bob, gpu="h800")
    quota_request_approve(request_id=decided.pk, staff=staff)
    staff_page = client_for(staff).get(reverse("dashboard")).content.decode()
    assert 'class="badge yellow nav-count"' in staff_page
    assert ">2</span>" in staff_page.split("nav-count")[1][:80]
    assert "nav-count" not in alice_client.get(reverse("dashboard")).content.decode()


def test_the_badge_costs_one_query_and_none_when_nothing_reads_it(rich_alice, staff, rf):
    from instances.context_processors import quota_waiting

    request = rf.get("/")
    request.user = staff
    context = quota_waiting(request)
    with CaptureQueriesContext(connection) as queries:
        assert int(str(context["quota_waiting"])) == 0
    assert len(queries) == 1
    request.user = rich_alice
    assert quota_waiting(request) == {}


def test_the_queue_puts_overdue_requests_first_and_measures_each_against_the_sla(rich_alice, bob, charlie, settings):
    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 30
    fresh = _ask(rich_alice, minutes_ago=2)
    late = _ask(bob, minutes_ago=50)
    close = _ask(charlie, minutes_ago=25)
    queue = selectors.quota_review_queue()
    assert [item.request.pk for item in queue] == [late.pk, close.pk, fresh.pk]
    assert [(i.overdue, i.urgency) for i in queue] == [(True, "red"), (False, "yellow"), (False, "green")]
    assert (queue[0].age_min, queue[0].minutes_over, queue[0].sla_pct) == (50, 20, 100)
    assert (queue[1].minutes_left, queue[2].minutes_left) == (5, 28)

    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 10  # configurable: the same ages, a stricter promise
    assert [i.overdue for i in selectors.quota_review_queue()] == [True, True, False]


def test_the_review_page_shows_ages_against_the_sla_most_urgent_first(rich_alice, bob, staff, client_for, settings):
    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 30
    _ask(rich_alice, minutes_ago=3)
    _ask(bob, minutes_ago=40)
    page = client_for(staff).get(reverse("quota_review")).content.decode()
    assert page.index("bob@example.com") < page.index("alice@example.com")
    assert "Overdue by 10 min" in page and "27 min left" in page
    assert "1 overdue" in page and "within 30 minutes" in page


def test_capacity_per_region_and_forecast_per_model(rich_alice, bob, staff, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    launch(rich_alice, count=4)  # a800 in cn-north-1
    for region in Region.objects.all():
        services.region_nodes_sync(region=region)
    grant = _ask(rich_alice, cards=12)
    quota_request_approve(request_id=grant.pk, staff=staff, cards=10)
    _ask(bob, cards=20)  # waiting

    overview = selectors.quota_capacity_overview()
    rows = {
        (region["region"].slug, row["gpu_model"].slug): row for region in overview["regions"] for row in region["rows"]
    }
    north = rows[("cn-north-1", "a800-80g")]
    assert (north["total"], north["held"], north["free"]) == (16, 4, 12)
    east = rows[("cn-east-1", "a800-80g")]
    assert (east["total"], east["held"], east["free"]) == (8, 0, 8)
    a800 = next(m for m in overview["gpu_models"] if m["gpu_model"].slug == "a800-80g")
    assert (a800["total"], a800["held"], a800["granted"], a800["grants"]) == (24, 4, 10, 1)
    assert (a800["asked"], a800["waiting"], a800["forecast"], a800["fits"]) == (20, 1, 24, True)
    assert a800["forecast_pct"] == 100

    _ask(UserFactory(email="dora@example.com"), cards=9)  # one more waiting request tips it over
    a800 = next(m for m in selectors.quota_capacity_overview()["gpu_models"] if m["gpu_model"].slug == "a800-80g")
    assert (a800["forecast"], a800["fits"]) == (33, False)


def test_capacity_ignores_expired_grants_and_out_of_service_cards(rich_alice, staff):
    launch(rich_alice, count=1)
    region = Region.objects.get(slug="cn-north-1")
    services.region_nodes_sync(region=region)
    node = region.nodes.filter(gpu_model__slug="a800-80g").exclude(instances__isnull=False).first()
    type(node).objects.filter(pk=node.pk).update(is_healthy=False)
    grant = _ask(rich_alice, cards=12)
    quota_request_approve(request_id=grant.pk, staff=staff, days=1)
    QuotaRequest.objects.filter(pk=grant.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    overview = selectors.quota_capacity_overview()
    row = next(r for r in overview["regions"] if r["region"].slug == "cn-north-1")["rows"]
    a800 = next(r for r in row if r["gpu_model"].slug == "a800-80g")
    assert (a800["total"], a800["out_of_service"]) == (8, 8)
    model = next(m for m in overview["gpu_models"] if m["gpu_model"].slug == "a800-80g")
    assert model["granted"] == 0


def test_the_capacity_table_costs_a_fixed_number_of_queries(rich_alice, staff):
    launch(rich_alice, count=2)
    with CaptureQueriesContext(connection) as queries:
        selectors.quota_capacity_overview()
    assert len(queries) == 7  # reserved cards per region and model: one more


def test_staff_read_the_alert_in_the_consoles_language_not_the_requesters(rich_alice, staff):
    from django.utils import translation

    mail.outbox.clear()
    with translation.override("zh-hans"), committed():
        _ask(rich_alice, cards=20)
    assert [m.subject for m in mail.outbox] == ["Quota request: alice@example.com asks for 20 A800 80GB cards"]


def test_the_forecast_counts_only_what_a_request_adds_to_the_cards_its_user_holds(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    launch(rich_alice, count=4)
    _ask(rich_alice, cards=16)  # a total of 16: 12 more than the 4 held
    a800 = next(m for m in selectors.quota_capacity_overview()["gpu_models"] if m["gpu_model"].slug == "a800-80g")
    assert (a800["held"], a800["asked"], a800["extra"], a800["forecast"]) == (4, 16, 12, 16)


def test_the_requester_is_told_the_promised_time(rich_alice, alice_client, settings):
    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 20
    gpu = GpuModel.objects.get(slug="h800")
    response = alice_client.post(
        reverse("quota"), {"gpu_model": gpu.pk, "cards": 16, "duration_days": 14, "reason": "Run"}, follow=True
    )
    assert "decide within 20 minutes" in response.content.decode()


def test_a_request_past_the_sla_is_escalated_to_staff_once(rich_alice, bob, staff, settings):
    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 30
    late = _ask(rich_alice, minutes_ago=31)
    _ask(bob, minutes_ago=29)  # not yet due
    mail.outbox.clear()
    with committed():
        assert quota_requests_overdue_escalate() == 1
    with committed():
        assert quota_requests_overdue_task() == 0  # the beat's task: already escalated, no second mail
    assert [m.subject for m in mail.outbox] == [
        "Overdue quota request: alice@example.com has waited over 30 minutes for 16 A800 80GB cards"
    ]
    assert list(late.audit.values_list("action", flat=True)) == ["requested", "overdue"]


def test_a_decided_request_is_not_escalated(rich_alice, staff, settings):
    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 30
    request = _ask(rich_alice, minutes_ago=45)
    quota_request_approve(request_id=request.pk, staff=staff)
    assert quota_requests_overdue_escalate() == 0


def test_the_escalation_runs_on_the_beat(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["instances-quota-overdue"]
    assert entry["task"] == "instances.tasks.quota_requests_overdue_task"
