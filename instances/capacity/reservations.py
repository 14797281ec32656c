"""Reserved capacity: staff hold N cards of a GPU model in a region for one account for a time box.

The rule placement keeps, per region and model, while reservations are in their window::

    free cards + cards held by interruptible single-node instances  >=  Σ unused reserved cards

"Unused" is a reservation's cards minus what its holder's on-demand instances of that model hold
there. Interruptible work is never refused for a reservation (it moves cards from free to
interruptible, which leaves the left side unchanged): unused reserved cards are lent to it, and the
holder's on-demand launch takes them back through the usual preemption path (grace, checkpoint,
requeue). An on-demand placement (launch, start, recovery) of ``c`` cards draws on its owner's
unused reserved cards first; only the rest must fit in the unreserved free-or-interruptible pool
(``reservations_admit``). Admission runs under one advisory lock per region and model, so two
placements cannot both spend the same unreserved cards; nodes' own conditional updates still make
sure no card is ever handed out twice.

The launch path pays one indexed EXISTS for on-demand work (``reservations_active_exist``); the lock
and the counts are read only where a reservation is in its window. The pool is counted per region,
not per node: a holder asking for 8 cards on one node may still find them spread over several.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core.statemachine import transition, transition_table
from instances.errors import NoCapacity, OperationNotAllowed, ReservationInvalid
from instances.models import GpuModel, Instance, Node, QuotaRequest, Region, Reservation, ReservationEvent
from notifications.models import Kind
from notifications.services import Message, notify
from teams.models import Team

logger = logging.getLogger(__name__)

R = Reservation.Status
ALLOWED = transition_table({R.ACTIVE: {R.EXPIRED, R.CANCELLED}, R.EXPIRED: (), R.CANCELLED: ()})

MAX_CARDS = 4096  # a region's worth and more: a typo's guard, not a policy


def _lock(*, region_id: int, gpu_model_id: int) -> None:
    """Serialise reservation decisions and on-demand admissions of one region and model until the
    transaction ends (released by its commit or rollback)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"reservation:{region_id}:{gpu_model_id}"]
        )


def _current(now: datetime):
    return Q(status=R.ACTIVE, starts_at__lte=now, ends_at__gt=now)


def _event(*, reservation: Reservation, actor, action: str, **detail) -> None:
    ReservationEvent.objects.create(reservation=reservation, actor=actor, action=action, detail=detail)


# --- Admission: the one check on the placement path ------------------------------------------------------------


def _tell(reservation: Reservation, action: str) -> None:
    """The holder hears that cards were reserved for them, or that a reservation ended (in a team, its
    owners and admins: the recipients hook), in their own language. Called in the change's transaction:
    the inbox line and the mail's outbox row commit or roll back with it."""

    def render() -> Message:
        values = {
            "cards": reservation.cards,
            "gpu": reservation.gpu_model.name,
            "region": reservation.region.name,
            "start": reservation.starts_at.strftime("%Y-%m-%d %H:%M UTC"),
            "end": reservation.ends_at.strftime("%Y-%m-%d %H:%M UTC"),
        }
        what = ngettext("%(cards)d %(gpu)s card", "%(cards)d %(gpu)s cards", reservation.cards) % values
        values["what"] = what
        if action == "created":
            return Message(
                title=_("%(what)s reserved for you in %(region)s") % values,
                body=_(
                    "From %(start)s until %(end)s your on-demand launches of %(gpu)s in %(region)s draw on "
                    "these cards first, even when the region is otherwise full."
                )
                % values,
            )
        if action == "cancelled":
            return Message(
                title=_("Your reservation of %(what)s in %(region)s was cancelled") % values,
                body=_("Staff ended it before %(end)s. Its cards go back to everyone; what you run keeps running.")
                % values,
            )
        return Message(
            title=_("Your reservation of %(what)s in %(region)s ended") % values,
            body=_("Its window closed at %(end)s. Its cards go back to everyone; what you run keeps running.") % values,
        )

    notify(
        user=reservation.account,
        kind=Kind.RESERVATION,
        render=render,
        link="/quota/",
        data={"reservation_id": reservation.pk, "action": action, "cards": reservation.cards},
    )


def reservations_active_exist(*, region_id: int, gpu_model_id: int, now: datetime | None = None) -> bool:
    """Whether any reservation of this region and model is in its window: one indexed EXISTS."""
    now = now or timezone.now()
    return Reservation.objects.filter(_current(now), region_id=region_id, gpu_model_id=gpu_model_id).exists()


def pool_cards(*, region: Region, gpu_model: GpuModel) -> int:
    """Cards an on-demand placement could get now: free on healthy nodes, plus those held by
    interruptible single-node instances there (the ones preemption can take back)."""
    free = (
        Node.objects.filter(
            region=region, backend_alias=region.backend_alias, gpu_model=gpu_model, is_healthy=True
        ).aggregate(n=Sum("free_cards"))["n"]
        or 0
    )
    lent = (
        Instance.objects.filter(
            region=region,
            gpu_model=gpu_model,
            tier=Instance.Tier.INTERRUPTIBLE,
            node_count=1,
            status__in=Instance.HOLDING_GPUS,
            no_gpu=False,  # a run without GPU holds none
            node__is_healthy=True,
        ).aggregate(n=Sum("gpu_count"))["n"]
        or 0
    )
    return free + lent


def reserved_unused(
    *, region_id: int, gpu_model_id: int, now: datetime | None = None, exclude_instance: uuid.UUID | None = None
) -> dict[int, tuple[int, int]]:
    """Per holding account, ``(reserved, used)``: the cards its reservations in their window hold here,
    and those its on-demand instances of the model hold here (``exclude_instance``, the one being
    placed, left out: it holds nothing yet)."""
    now = now or timezone.now()
    reserved = dict(
        Reservation.objects.filter(_current(now), region_id=region_id, gpu_model_id=gpu_model_id)
        .values_list("account_id")
        .annotate(n=Sum("cards"))
        .order_by()
    )
    if not reserved:
        return {}
    using = Instance.objects.filter(
        owner_id__in=list(reserved),
        region_id=region_id,
        gpu_model_id=gpu_model_id,
        tier=Instance.Tier.ON_DEMAND,
        status__in=Instance.HOLDING_GPUS,
        no_gpu=False,  # a run without GPU holds none
        node__isnull=False,
    )
    if exclude_instance is not None:
        using = using.exclude(pk=exclude_instance)
    used = dict(using.values_list("owner_id").annotate(n=Sum(F("gpu_count") * F("node_count"))).order_by())
    return {account: (cards, used.get(account, 0)) for account, cards in reserved.items()}


def reservations_admit(
    *, region: Region, gpu_model: GpuModel, owner_id: int, count: int, instance_id: uuid.UUID | None = None
) -> None:
    """Refuse an on-demand placement of ``count`` cards for ``owner_id`` that would eat into cards
    reserved for another account (``NoCapacity``). Call inside the placement's transaction, before
    taking cards: where a reservation is in its window, it holds the region and model's lock until the
    transaction ends, so the next admission sees these cards gone.

    The owner's own unused reserved cards come first: that part is always admitted (placement then
    finds free cards, or preempts interruptible work that borrowed them); the rest must fit in the
    cards nobody has reserved.
    """
    if not reservations_active_exist(region_id=region.pk, gpu_model_id=gpu_model.pk):
        return
    _lock(region_id=region.pk, gpu_model_id=gpu_model.pk)
    # Read after the lock: an admission that held it has committed its cards.
    holders = reserved_unused(region_id=region.pk, gpu_model_id=gpu_model.pk, exclude_instance=instance_id)
    if not holders:
        return  # it ended while we waited
    unused = {account: max(cards - used, 0) for account, (cards, used) in holders.items()}
    own = min(count, unused.get(owner_id, 0))
    beyond = count - own
    if beyond == 0:
        return
    unreserved = pool_cards(region=region, gpu_model=gpu_model) - sum(unused.values())
    if beyond > unreserved:
        raise NoCapacity(
            _(
                "The %(gpu)s cards left in %(region)s are reserved for other accounts right now. "
                "Try fewer cards, the interruptible tier, or another region."
            )
            % {"gpu": gpu_model.name, "region": region.name},
            field="gpu_count",
        )


# --- Staff: grant, cancel, expire ------------------------------------------------------------------------------


def reservation_account_find(*, text: str):
    """The account a reservation is for, as staff type it: a person's e-mail address, or a team's slug
    (a team's account has no address anyone types). None when nobody matches."""
    text = (text or "").strip()
    if not text:
        return None
    if "@" in text:
        return get_user_model().objects.filter(email__iexact=text, is_active=True).first()
    team = Team.objects.select_related("account").filter(slug=text.lower()).first()
    return team.account if team is not None and team.account.is_active else None


def reservation_create(
    *,
    account,
    region: Region,
    gpu_model: GpuModel,
    cards: int,
    ends_at: datetime,
    staff,
    starts_at: datetime | None = None,
    note: str = "",
    quota_request: QuotaRequest | None = None,
) -> Reservation:
    """Hold ``cards`` cards for ``account`` from ``starts_at`` (now when not given) until ``ends_at``.

    Never more than the region's cards in service of the model, counting every reservation whose window
    overlaps this one: a reservation is a promise, and the console does not promise cards it lacks.
    Cards busy with other accounts' on-demand work when it starts are not taken from them: from then on
    nobody else's on-demand work gets the cards they give back until the reservation is whole.
    """
    now = timezone.now()
    starts_at = starts_at or now
    note = (note or "").strip()
    if account is None or not account.is_active:
        raise ReservationInvalid(_("Choose an active account: an e-mail address or a team's slug."), field="account")
    if not region.is_active:
        raise ReservationInvalid(_("That region is not available."), field="region")
    if not gpu_model.is_active:
        raise ReservationInvalid(_("That GPU model is not available."), field="gpu_model")
    if not (1 <= cards <= MAX_CARDS):
        raise ReservationInvalid(_("Reserve between 1 and %(n)d cards.") % {"n": MAX_CARDS}, field="cards")
    if ends_at <= starts_at:
        raise ReservationInvalid(_("The end must be after the start."), field="ends_at")
    if ends_at <= now:
        raise ReservationInvalid(_("The end must be in the future."), field="ends_at")
    if len(note) > 2000:
        raise ReservationInvalid(_("The note is at most 2,000 characters."), field="note")
    with transaction.atomic():
        _lock(region_id=region.pk, gpu_model_id=gpu_model.pk)
        in_service = (
            Node.objects.filter(
                region=region, backend_alias=region.backend_alias, gpu_model=gpu_model, is_healthy=True
            ).aggregate(n=Sum("total_cards"))["n"]
            or 0
        )
        # The most that overlapping reservations hold at once is at most their sum: a safe bound.
        overlapping = (
            Reservation.objects.filter(
                region=region, gpu_model=gpu_model, status=R.ACTIVE, starts_at__lt=ends_at, ends_at__gt=starts_at
            ).aggregate(n=Sum("cards"))["n"]
            or 0
        )
        if overlapping + cards > in_service:
            raise ReservationInvalid(
                _(
                    "%(region)s has %(total)d %(gpu)s cards in service and %(held)d are already reserved in that "
                    "window, so %(n)d more cannot be."
                )
                % {"region": region.name, "total": in_service, "gpu": gpu_model.name, "held": overlapping, "n": cards},
                field="cards",
            )
        reservation = Reservation.objects.create(
            account=account,
            region=region,
            gpu_model=gpu_model,
            cards=cards,
            starts_at=starts_at,
            ends_at=ends_at,
            note=note,
            created_by=staff,
            quota_request=quota_request,
        )
        _event(
            reservation=reservation,
            actor=staff,
            action="created",
            cards=cards,
            starts_at=starts_at.isoformat(),
            ends_at=ends_at.isoformat(),
            quota_request=quota_request.pk if quota_request else None,
        )
        if quota_request is None:  # an approval's own notice names the reservation
            _tell(reservation, "created")
    return reservation


def reservation_cancel(*, reservation_id: int, staff, note: str = "") -> Reservation:
    """End an active reservation now: its cards go back to everyone at once."""
    reservation = Reservation.objects.get(pk=reservation_id)
    moved = reservation.status == R.ACTIVE and transition(
        model=Reservation,
        pk=reservation_id,
        table=ALLOWED,
        src=R.ACTIVE,
        dst=R.CANCELLED,
        record=lambda: (
            _event(reservation=reservation, actor=staff, action="cancelled", note=(note or "").strip()),
            _tell(reservation, "cancelled"),
        ),
    )
    if not moved:
        raise OperationNotAllowed(_("This reservation has already ended."))
    reservation.refresh_from_db()
    return reservation


def reservations_expire(*, now: datetime | None = None) -> int:
    """Periodic: mark reservations whose window ended expired (placement already ignores them).
    Compare-and-set per row, so repeated or concurrent runs expire each once. Returns how many."""
    now = now or timezone.now()
    expired = 0
    ended = Reservation.objects.filter(status=R.ACTIVE, ends_at__lte=now).select_related(
        "account", "region", "gpu_model"
    )
    for reservation in ended:
        if transition(
            model=Reservation,
            pk=reservation.pk,
            table=ALLOWED,
            src=R.ACTIVE,
            dst=R.EXPIRED,
            record=lambda reservation=reservation: (
                _event(reservation=reservation, actor=None, action="expired"),
                _tell(reservation, "expired"),
            ),
        ):
            expired += 1
    return expired
