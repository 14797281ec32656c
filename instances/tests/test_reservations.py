"""Reserved capacity on the simulated cloud: cards held for one account, lent to interruptible work,
taken back by preemption when the holder launches, ended by expiry or by staff.

The H800 node of the small fleet (8 cards in cn-north-1) is the region's whole H800 capacity.
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from instances.capacity.preemption import instance_preemption_finish
from instances.capacity.reservations import (
    reservation_account_find,
    reservation_cancel,
    reservation_create,
    reservations_expire,
)
from instances.errors import NoCapacity, OperationNotAllowed, QuotaRequestInvalid, ReservationInvalid
from instances.models import GpuModel, Instance, Node, QuotaAudit, QuotaRequest, Region, Reservation
from instances.quota import quota_request_approve, quota_request_create
from instances.services import instance_release, instance_start, instance_stop, nodes_sync
from instances.tests.conftest import committed, fund, running
from notifications.models import Kind, Notification
from teams.services import team_create

S = Instance.Status
T = Instance.Tier


@pytest.fixture
def h800(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    nodes_sync(alias="default")
    return GpuModel.objects.get(slug="h800")


@pytest.fixture
def bob_rich(bob, catalogue):
    fund(bob, 1_000_000)
    return bob


@pytest.fixture
def charlie_rich(charlie, catalogue):
    fund(charlie, 1_000_000)
    return charlie


def region():
    return Region.objects.get(slug="cn-north-1")


def reserve(account, staff, *, cards=4, starts_in=timedelta(0), lasts=timedelta(days=1)) -> Reservation:
    now = timezone.now()
    return reservation_create(
        account=account,
        region=region(),
        gpu_model=GpuModel.objects.get(slug="h800"),
        cards=cards,
        starts_at=now + starts_in,
        ends_at=now + starts_in + lasts,
        staff=staff,
    )


def launch(user, **options) -> Instance:
    """The shared helper on the H800 node, run through its worker."""
    return running(user, **{"gpu": "h800", **options})


def free_cards() -> int:
    return Node.objects.get(gpu_model__slug="h800").free_cards


# --- The hold ----------------------------------------------------------------------------------------------------


def test_others_on_demand_work_leaves_the_reserved_cards_and_the_holder_gets_them(rich_alice, h800, bob_rich, staff):
    alice = rich_alice
    reserve(alice, staff, cards=4)
    assert launch(bob_rich, count=4).status == S.RUNNING
    with pytest.raises(NoCapacity) as refused:
        launch(bob_rich, count=1)
    assert "reserved for other accounts" in refused.value.message
    assert free_cards() == 4  # the refusal took nothing
    # The region is full for everyone else; the holder's launch is accepted.
    assert launch(alice, count=4).status == S.RUNNING
    assert free_cards() == 0


def test_the_holder_draws_on_its_reservation_first_and_beyond_it_only_on_unreserved_cards(
    rich_alice, h800, bob_rich, staff
):
    reserve(rich_alice, staff, cards=4)
    launch(rich_alice, count=2)  # from the reservation: 2 reserved cards left unused
    launch(bob_rich, count=4)  # 6 free, 2 still reserved: 4 are anyone's
    with pytest.raises(NoCapacity):
        launch(bob_rich, count=1)
    with pytest.raises(NoCapacity):
        launch(rich_alice, count=4)  # 2 from the reservation, but nobody's 2 others are left
    launch(rich_alice, count=2)
    assert free_cards() == 0


def test_interruptible_work_is_never_refused_for_a_reservation(rich_alice, h800, bob_rich, staff):
    reserve(rich_alice, staff, cards=8)
    spot = launch(bob_rich, count=8, tier=T.INTERRUPTIBLE)
    assert spot.status == S.RUNNING and free_cards() == 0


def test_an_upcoming_reservation_holds_nothing_yet(rich_alice, h800, bob_rich, staff):
    reserve(rich_alice, staff, cards=8, starts_in=timedelta(hours=1))
    assert launch(bob_rich, count=8).status == S.RUNNING


# --- Lent to interruptible work, then taken back --------------------------------------------------------------


def test_reserved_cards_lent_to_interruptible_work_come_back_by_preemption_when_the_holder_launches(
    rich_alice, h800, bob_rich, charlie_rich, staff
):
    reserve(rich_alice, staff, cards=8)
    four = launch(bob_rich, count=4, tier=T.INTERRUPTIBLE)
    two = launch(bob_rich, count=2, tier=T.INTERRUPTIBLE)
    assert free_cards() == 2
    # Another account's on-demand work may not take the reserved cards, free or lent.
    with pytest.raises(NoCapacity):
        launch(charlie_rich, count=1)

    mine = launch(rich_alice, count=4)  # the 2 free cards and the 2-card spot instance's
    two.refresh_from_db()
    assert two.status == S.PREEMPTING and two.preempted_for_id == mine.pk
    assert Instance.objects.get(pk=four.pk).status == S.RUNNING
    assert mine.status == S.PROVISIONING and free_cards() == 0
    with committed():
        assert instance_preemption_finish(instance_id=two.pk, now=timezone.now() + timedelta(seconds=31))
    two.refresh_from_db()
    mine.refresh_from_db()
    assert (two.status, mine.status) == (S.PREEMPTED, S.RUNNING)  # its checkpoint ran, its disk is kept
    # The rest of the reservation is the 4-card spot instance's cards: it gives way in turn.
    rest = launch(rich_alice, count=4)
    four.refresh_from_db()
    assert four.status == S.PREEMPTING and four.preempted_for_id == rest.pk
    assert free_cards() == 0
    # Bob's preempted instance waits in the queue; charlie still gets nothing.
    with pytest.raises(NoCapacity):
        launch(charlie_rich, count=1)


def test_a_stopped_instance_of_another_account_may_not_start_on_reserved_cards(rich_alice, h800, bob_rich, staff):
    bobs = launch(bob_rich, count=8)
    with committed():
        instance_stop(instance=bobs)
    reserve(rich_alice, staff, cards=4)
    with pytest.raises(NoCapacity) as refused, committed():
        instance_start(instance=Instance.objects.get(pk=bobs.pk))
    assert "reserved for other accounts" in refused.value.message
    bobs.refresh_from_db()
    assert bobs.status == S.STOPPED and free_cards() == 8


# --- Granting, ending --------------------------------------------------------------------------------------------


def test_a_reservation_never_promises_more_cards_than_are_in_service(rich_alice, h800, bob_rich, staff):
    reserve(rich_alice, staff, cards=6)
    with pytest.raises(ReservationInvalid) as refused:
        reserve(bob_rich, staff, cards=3)
    assert refused.value.field == "cards"
    # A window that does not overlap is free to promise them again.
    reserve(bob_rich, staff, cards=8, starts_in=timedelta(days=2))
    with pytest.raises(ReservationInvalid) as bad:
        reserve(bob_rich, staff, cards=1, starts_in=timedelta(days=-3))  # ended already
    assert bad.value.field == "ends_at"


def test_expiry_is_idempotent_and_gives_the_cards_back(rich_alice, h800, bob_rich, staff):
    held = reserve(rich_alice, staff, cards=8)
    with pytest.raises(NoCapacity):
        launch(bob_rich, count=1)
    Reservation.objects.filter(pk=held.pk).update(
        starts_at=timezone.now() - timedelta(days=2), ends_at=timezone.now() - timedelta(seconds=1)
    )
    assert launch(bob_rich, count=1).status == S.RUNNING  # ended: no longer held, expired or not
    assert reservations_expire() == 1
    assert reservations_expire() == 0
    held.refresh_from_db()
    assert held.status == Reservation.Status.EXPIRED
    assert list(held.events.values_list("action", flat=True)) == ["created", "expired"]


def test_the_expiry_task_is_on_the_beat_schedule(settings):
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "instances.tasks.reservations_expire_task" in names


def test_staff_cancel_a_reservation_once(rich_alice, h800, bob_rich, staff):
    held = reserve(rich_alice, staff, cards=8)
    cancelled = reservation_cancel(reservation_id=held.pk, staff=staff)
    assert cancelled.status == Reservation.Status.CANCELLED
    assert launch(bob_rich, count=8).status == S.RUNNING
    with pytest.raises(OperationNotAllowed):
        reservation_cancel(reservation_id=held.pk, staff=staff)
    assert [(e.action, e.actor) for e in held.events.all()] == [("created", staff), ("cancelled", staff)]


def test_a_teams_account_is_found_by_its_slug_and_holds_the_reservation(rich_alice, h800, bob_rich, staff):
    team = team_create(user=rich_alice, name="Lab")
    assert reservation_account_find(text=team.slug) == team.account
    assert reservation_account_find(text="ALICE@example.com") == rich_alice
    assert reservation_account_find(text="nobody") is None
    reserve(team.account, staff, cards=8)
    with pytest.raises(NoCapacity):
        launch(rich_alice, count=1)  # alice's own account is not the team's


# --- Approving a quota request with a reservation --------------------------------------------------------------


def test_approving_a_quota_request_can_reserve_the_cards_for_the_grants_window(rich_alice, h800, bob_rich, staff):
    request = quota_request_create(user=rich_alice, gpu_model=h800, cards=80, duration_days=7, reason="Training")
    # Nothing is approved when the region cannot promise the cards.
    with pytest.raises(ReservationInvalid):
        quota_request_approve(request_id=request.pk, staff=staff, cards=80, reserve_region=region())
    request.refresh_from_db()
    assert request.status == QuotaRequest.Status.PENDING and not Reservation.objects.exists()
    with pytest.raises(QuotaRequestInvalid):
        quota_request_approve(
            request_id=request.pk,
            staff=staff,
            cards=8,
            reserve_region=region(),
            reserve_ends_at=timezone.now() + timedelta(days=30),  # beyond the grant
        )

    with committed():
        quota_request_approve(request_id=request.pk, staff=staff, cards=8, days=3, reserve_region=region())
    request.refresh_from_db()
    held = Reservation.objects.get()
    assert (held.account, held.cards, held.ends_at, held.quota_request) == (rich_alice, 8, request.expires_at, request)
    assert QuotaAudit.objects.filter(request=request, action="reserved").exists()
    assert "8 of them are reserved for you in North China 1" in mail.outbox[-1].body
    with pytest.raises(NoCapacity):
        launch(bob_rich, count=1)
    mine = launch(rich_alice, count=8)
    assert mine.status == S.RUNNING
    with committed():
        instance_release(instance=mine)


def test_the_holder_hears_of_a_reservation_made_cancelled_and_ended(rich_alice, h800, staff):
    team = team_create(user=rich_alice, name="Vision")
    first = reserve(rich_alice, staff, cards=2)
    reservation_cancel(reservation_id=first.pk, staff=staff)
    second = reserve(team.account, staff, cards=1)  # a team's: its owner is told
    Reservation.objects.filter(pk=second.pk).update(
        starts_at=timezone.now() - timedelta(days=2), ends_at=timezone.now() - timedelta(seconds=1)
    )
    reservations_expire()
    reservations_expire()  # once only

    titles = list(
        Notification.objects.filter(user=rich_alice, kind=Kind.RESERVATION)
        .order_by("pk")
        .values_list("title", flat=True)
    )
    assert titles == [
        "2 H800 80GB cards reserved for you in North China 1 (Beijing)",
        "Your reservation of 2 H800 80GB cards in North China 1 (Beijing) was cancelled",
        "1 H800 80GB card reserved for you in North China 1 (Beijing)",
        "Your reservation of 1 H800 80GB card in North China 1 (Beijing) ended",
    ]


def test_a_reservation_made_by_approving_a_quota_request_is_told_once(rich_alice, h800, staff):
    request = quota_request_create(
        user=rich_alice, gpu_model=GpuModel.objects.get(slug="h800"), cards=80, duration_days=7, reason="training"
    )
    with committed():
        quota_request_approve(request_id=request.pk, staff=staff, cards=8, reserve_region=region())
    assert Reservation.objects.filter(quota_request=request).exists()
    kinds = list(Notification.objects.filter(user=rich_alice).values_list("kind", flat=True))
    assert kinds == [Kind.QUOTA_DECIDED]  # the approval's notice names the reservation
