"""Monthly budgets: each threshold alerts once a month, the hard cap stops compute and keeps the disk,
exact to the fen; the page sets the budget and refuses what is not an amount."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.tests.factories import UserFactory
from billing.models import LedgerAccount, Transaction
from billing.services import account_get, ledger_post
from budgets.models import Budget, BudgetAlert
from budgets.selectors import budget_status_for
from budgets.services import budget_set, budgets_check
from budgets.tasks import budgets_check_task
from instances.models import Instance
from instances.tests.conftest import committed, running
from teams.context import SESSION_KEY
from teams.models import Membership, Role, TeamEvent
from teams.services import team_create

S = Instance.Status
_KEYS = iter(range(10**6))


def spend(user, fen: int, *, at: datetime | None = None) -> None:
    """A usage charge of ``fen`` to ``user``'s paid balance, as settlement posts one (``at``: posted
    then; the ledger has no back-dating verb, so the field's default is moved for the call)."""
    field = Transaction._meta.get_field("created_at")
    original = field._get_default
    if at is not None:
        field._get_default = lambda: at
    try:
        ledger_post(
            key=f"test:usage:{user.pk}:{next(_KEYS)}",
            kind=Transaction.Kind.USAGE,
            user=user,
            legs=[
                (account_get(user=user, kind=LedgerAccount.Kind.CASH), -fen),
                (account_get(kind=LedgerAccount.Kind.REVENUE), fen),
            ],
        )
    finally:
        field._get_default = original


@pytest.fixture
def budgeted(rich_alice):
    budget_set(user=rich_alice, monthly_limit_fen=10_000)  # ¥100.00
    return rich_alice


def test_each_threshold_alerts_once(budgeted, mailoutbox):
    spend(budgeted, 4_999)
    assert budgets_check()["alerts"] == 0
    spend(budgeted, 1)  # exactly 50 %
    with committed():  # the e-mail goes when the alert's transaction commits
        assert budgets_check()["alerts"] == 1
        assert budgets_check()["alerts"] == 0
        assert budgets_check_task.apply().get() == {"alerts": 0, "stopped": 0}
    spend(budgeted, 3_500)  # 85 %
    with committed():
        assert budgets_check()["alerts"] == 1
    assert [m.subject for m in mailoutbox] == [
        "You have spent 50% of your monthly budget",
        "You have spent 80% of your monthly budget",
    ]
    assert list(BudgetAlert.objects.order_by("threshold").values_list("threshold", "spent_fen")) == [
        (50, 5_000),
        (80, 8_500),
    ]


def test_last_month_s_spending_does_not_count_and_alerts_start_again_each_month(budgeted, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    tz = ZoneInfo("Asia/Shanghai")
    spend(budgeted, 9_000, at=datetime(2026, 10, 31, 23, 59, tzinfo=tz))
    spend(budgeted, 1_000, at=datetime(2026, 11, 1, 0, 1, tzinfo=tz))
    assert budgets_check(now=datetime(2026, 11, 2, tzinfo=tz))["alerts"] == 0
    assert budgets_check(now=datetime(2026, 10, 31, 23, 59, 30, tzinfo=tz))["alerts"] == 2  # October: 90 %


def test_the_hard_cap_stops_compute_and_keeps_the_disk(budgeted, mailoutbox):
    instance = running(budgeted)
    budget_set(user=budgeted, monthly_limit_fen=10_000, hard_cap=True)
    spend(budgeted, 9_999)
    with committed():
        assert budgets_check()["stopped"] == 0  # one fen short
    spend(budgeted, 1)
    with committed():
        report = budgets_check()
    assert report == {"alerts": 1, "stopped": 1}  # 50 and 80 % went out with the first check
    instance.refresh_from_db()
    assert instance.status == S.STOPPED  # stopped, not released: the disk is kept
    assert "budget of ¥100.00 was reached" in instance.events.get(new=S.STOPPING).reason_text
    assert "Your running instances were stopped" in mailoutbox[-1].body


def test_lowering_the_budget_below_this_month_s_spending_stops_compute_at_the_next_check(budgeted):
    spend(budgeted, 10_000)
    budgets_check()
    instance = running(budgeted)  # the budget (¥100.00, no hard cap) allowed it
    budget_set(user=budgeted, monthly_limit_fen=9_000, hard_cap=True)
    with committed():
        assert budgets_check()["stopped"] == 1
    assert Instance.objects.get(pk=instance.pk).status == S.STOPPED


def test_without_the_hard_cap_nothing_stops(budgeted, mailoutbox):
    instance = running(budgeted)
    spend(budgeted, 12_000)
    with committed():
        assert budgets_check() == {"alerts": 3, "stopped": 0}
    assert Instance.objects.get(pk=instance.pk).status == S.RUNNING
    assert "Nothing was stopped" in mailoutbox[-1].body


def test_the_page_sets_shows_and_removes_the_budget(rich_alice, alice_client):
    url = reverse("budget")
    response = alice_client.post(url, {"amount": "¥1,234.50", "hard_cap": "on"})
    assert response.status_code == 302
    budget = Budget.objects.get(user=rich_alice)
    assert (budget.monthly_limit_fen, budget.hard_cap) == (123_450, True)
    spend(rich_alice, 61_725)
    html = alice_client.get(url).content.decode()
    assert "50 % used" in html and "¥617.25" in html and "hard cap on" in html
    assert budget_status_for(user=rich_alice).left_fen == 61_725
    alice_client.post(url, {"amount": ""})
    assert not Budget.objects.filter(user=rich_alice).exists()


@pytest.mark.parametrize("amount", ["abc", "-5", "0", "1.234"])
def test_what_is_not_an_amount_is_a_form_error(rich_alice, alice_client, amount):
    response = alice_client.post(reverse("budget"), {"amount": amount})
    assert response.status_code == 200
    assert 'class="error small"' in response.content.decode()
    assert not Budget.objects.exists()


def test_the_page_needs_a_login(client):
    assert client.get(reverse("budget")).status_code == 302


def test_budgets_are_each_user_s_own(budgeted, charlie, client_for):
    html = client_for(charlie).get(reverse("budget")).content.decode()
    assert "no budget set" in html and "¥100.00" not in html


def test_the_spending_lag_is_what_settlement_posted(budgeted):
    spend(budgeted, 2_500, at=timezone.now() - timedelta(minutes=1))
    assert budget_status_for(user=budgeted).percent == 25


def test_a_reached_hard_cap_refuses_launches_and_starts(budgeted):
    from instances.errors import BudgetReached
    from instances.services import instance_start
    from instances.tests.conftest import launch

    instance = running(budgeted)
    budget_set(user=budgeted, monthly_limit_fen=10_000, hard_cap=True)
    spend(budgeted, 10_000)
    with committed():
        budgets_check()
    instance.refresh_from_db()
    with pytest.raises(BudgetReached, match=r"budget of ¥100\.00 is reached"):
        launch(budgeted)
    with pytest.raises(BudgetReached):
        instance_start(instance=instance)
    budget_set(user=budgeted, monthly_limit_fen=20_000, hard_cap=True)  # raised: compute may start again
    with committed():
        instance_start(instance=instance)
    assert Instance.objects.get(pk=instance.pk).status in (S.STARTING, S.RUNNING)


def test_the_api_says_why_in_its_error_format(budgeted, alice_client):
    from instances.models import GpuModel, Image, Region

    budget_set(user=budgeted, monthly_limit_fen=100, hard_cap=True)
    spend(budgeted, 100)
    response = alice_client.post(
        "/api/v1/instances/",
        {
            "region": Region.objects.get(slug="cn-north-1").slug,
            "gpu_model": GpuModel.objects.get(slug="a800-80g").slug,
            "gpu_count": 1,
            "image": Image.objects.get(slug="pytorch-2.5-cu124").slug,
            "disk_gb": 50,
        },
        content_type="application/json",
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "budget_reached"


def test_a_budget_without_the_hard_cap_refuses_nothing(budgeted):
    spend(budgeted, 50_000)
    assert running(budgeted).status == S.RUNNING


# --- A team's budget (issue #15) ----------------------------------------------------------------------


@pytest.fixture
def lab(alice, bob, rich_alice):
    team = team_create(user=alice, name="Lab")
    team.people = {"alice": alice, "bob": bob, "dave": UserFactory(email="dave@example.com")}
    team.people["erin"] = UserFactory(email="erin@example.com")
    Membership.objects.create(team=team, user=bob, role=Role.MEMBER)
    Membership.objects.create(team=team, user=team.people["dave"], role=Role.ADMIN)
    Membership.objects.create(team=team, user=team.people["erin"], role=Role.BILLING)
    return team


@pytest.mark.parametrize(
    ("who", "page", "form", "save"),
    [("alice", 200, True, 302), ("dave", 200, True, 302), ("erin", 200, False, 403), ("bob", 403, False, 403)],
)
def test_the_team_budget_by_role(lab, client_for, who, page, form, save):
    client = client_for(lab.people[who])
    session = client.session
    session[SESSION_KEY] = lab.pk
    session.save()
    response = client.get(reverse("budget"))
    assert response.status_code == page
    if page == 200:
        assert ("Save budget" in response.content.decode()) is form
    response = client.post(reverse("budget"), {"amount": "300", "hard_cap": ""})
    assert response.status_code == save
    saved = Budget.objects.filter(user=lab.account, monthly_limit_fen=30_000).exists()
    assert saved is (save == 302)
    assert not Budget.objects.filter(user=lab.people[who]).exists()  # the team's, not the person's
    assert TeamEvent.objects.filter(team=lab, action=TeamEvent.Action.BUDGET_CHANGED).exists() is saved
