"""GPU quota: how many cards of each model a user may hold, and the requests for more.

A user's quota of a model is the base (``GpuQuota``, or ``INSTANCES_DEFAULT_GPU_QUOTA``) or a larger
grant that has not expired. Launching and starting check it (``quota_check``, under a lock on the user
and model); staff approve or deny requests, and grants expire on their own.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection
from django.db import connection, transaction
from django.db.models import F, Max, Sum
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import override

from instances.capacity.reservations import reservation_create
from instances.errors import OperationNotAllowed, QuotaExceeded, QuotaRequestInvalid, ReservationInvalid
from instances.models import GpuModel, GpuQuota, Instance, QuotaAudit, QuotaRequest, Region
from notifications.models import Kind
from notifications.services import Message, notify
from teams.models import TeamEvent
from teams.services import team_event_record

logger = logging.getLogger(__name__)


_UNSET = object()


def quota_effective(*, user, gpu_model: GpuModel, now: datetime | None = None, base=_UNSET) -> int:
    """The cards of ``gpu_model`` the user may hold: the base quota, or a larger unexpired grant.

    ``base`` is the user's quota row's ``cards`` when the caller already holds it.
    """
    now = now or timezone.now()
    if base is _UNSET:
        base = GpuQuota.objects.filter(user=user, gpu_model=gpu_model).values_list("cards", flat=True).first()
    if base is None:
        base = settings.INSTANCES_DEFAULT_GPU_QUOTA
    granted = (
        QuotaRequest.objects.filter(
            user=user, gpu_model=gpu_model, status=QuotaRequest.Status.APPROVED, expires_at__gt=now
        ).aggregate(m=Max("granted_cards"))["m"]
        or 0
    )
    return max(base, granted)


def quota_usage(*, user, gpu_model: GpuModel) -> int:
    return (
        Instance.objects.filter(
            owner=user, gpu_model=gpu_model, status__in=Instance.HOLDING_GPUS, no_gpu=False
        ).aggregate(n=Sum(F("gpu_count") * F("node_count")))["n"]
        or 0
    )


def _quota_lock(*, user, gpu_model: GpuModel) -> None:
    """Serialise one user's launches and starts of one model until the transaction ends.

    A transaction-scoped advisory lock on the pair: nothing to create first (locking the quota row
    meant inserting one for every pair a user ever launched), and it is released by the commit or
    the rollback like a row lock.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"quota:{user.pk}:{gpu_model.pk}"])


def _quota_base_granted_and_used(*, user, gpu_model: GpuModel) -> tuple[int | None, int, int]:
    """The user's base quota of ``gpu_model`` (None: the default), the largest unexpired grant and the
    cards they hold: what ``quota_effective`` and ``quota_usage`` read, in one statement for the
    launch's hot path.

    Plain SQL: the ORM spends longer building these aggregates than PostgreSQL spends running them.
    """
    qn = connection.ops.quote_name
    quotas = qn(GpuQuota._meta.db_table)
    requests, instances = qn(QuotaRequest._meta.db_table), qn(Instance._meta.db_table)
    holding = list(Instance.HOLDING_GPUS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT cards FROM {quotas} WHERE user_id = %s AND gpu_model_id = %s),"  # noqa: S608
            f" (SELECT MAX(granted_cards) FROM {requests} WHERE user_id = %s AND gpu_model_id = %s"
            f" AND status = %s AND expires_at > %s),"
            f" (SELECT SUM(gpu_count * node_count) FROM {instances} WHERE owner_id = %s AND gpu_model_id = %s"
            f" AND status = ANY(%s) AND NOT no_gpu)",  # a no-GPU run holds no cards
            [
                *(user.pk, gpu_model.pk),
                *(user.pk, gpu_model.pk, QuotaRequest.Status.APPROVED, timezone.now()),
                *(user.pk, gpu_model.pk, holding),
            ],
        )
        base, granted, used = cursor.fetchone()
    return base, granted or 0, used or 0


def quota_check(*, user, gpu_model: GpuModel, count: int) -> None:
    """Refuse going over quota. Call it inside the transaction that takes the cards: it holds the
    user's lock on the model until then, so two launches at once cannot both fit under one quota."""
    _quota_lock(user=user, gpu_model=gpu_model)
    # Read after the lock, in a statement of its own: a launch that held it has committed its instance.
    base, granted, used = _quota_base_granted_and_used(user=user, gpu_model=gpu_model)
    limit = max(settings.INSTANCES_DEFAULT_GPU_QUOTA if base is None else base, granted)
    if used + count > limit:
        raise QuotaExceeded(
            _(
                "Your quota for %(gpu)s is %(limit)d cards and %(used)d are in use, so %(count)d more would "
                "exceed it. Request more on the GPU quota page."
            )
            % {"gpu": gpu_model.name, "limit": limit, "used": used, "count": count},
            field="gpu_count",
        )


# --- GPU quota requests ------------------------------------------------------------------------------------


def account_label(user) -> str:
    """How staff see who asks: a team's name for a team's account (whose address is no one's), else the
    person's address."""
    team = getattr(user, "team", None)
    return _("team %(name)s") % {"name": team.name} if team is not None else user.email


def _quota_audit(*, request: QuotaRequest, actor, action: str, **detail) -> None:
    QuotaAudit.objects.create(request=request, actor=actor, action=action, detail=detail)


def quota_request_create(
    *, user, gpu_model: GpuModel, cards: int, duration_days: int, reason: str, actor=None
) -> QuotaRequest:
    """Ask to hold up to ``cards`` cards of a model for ``duration_days``. One pending request per model.

    ``user`` is the account whose quota it is (a team's, in a team's context); ``actor`` the person who
    asks (``user`` when not given), named in the audit rows and in the team's audit log."""
    actor = actor if actor is not None else user
    current = quota_effective(user=user, gpu_model=gpu_model)
    if cards <= current:
        raise QuotaRequestInvalid(
            _("Your quota for %(gpu)s is already %(n)d cards.") % {"gpu": gpu_model.name, "n": current}, field="cards"
        )
    if cards > 512:
        raise QuotaRequestInvalid(_("Ask for at most 512 cards; contact sales beyond that."), field="cards")
    if not (1 <= duration_days <= settings.INSTANCES_QUOTA_MAX_DAYS):
        raise QuotaRequestInvalid(
            _("Choose between 1 and %(n)d days.") % {"n": settings.INSTANCES_QUOTA_MAX_DAYS}, field="duration_days"
        )
    if not (reason or "").strip():
        raise QuotaRequestInvalid(_("Tell us what the GPUs are for."), field="reason")
    with transaction.atomic():
        GpuQuota.objects.get_or_create(user=user, gpu_model=gpu_model)
        GpuQuota.objects.select_for_update().get(user=user, gpu_model=gpu_model)
        if QuotaRequest.objects.filter(user=user, gpu_model=gpu_model, status=QuotaRequest.Status.PENDING).exists():
            raise QuotaRequestInvalid(
                _("You already have a pending request for %(gpu)s.") % {"gpu": gpu_model.name}, field="gpu_model"
            )
        request = QuotaRequest.objects.create(
            user=user, gpu_model=gpu_model, cards=cards, duration_days=duration_days, reason=reason.strip()
        )
        _quota_audit(request=request, actor=actor, action="requested", cards=cards, duration_days=duration_days)
        if actor.pk != user.pk:
            team_event_record(
                account=user,
                actor=actor,
                action=TeamEvent.Action.QUOTA_REQUESTED,
                target=gpu_model.name,
                details={"cards": cards, "days": duration_days},
            )
        # After the commit: staff must never be told of a request that rolled back.
        transaction.on_commit(lambda: quota_request_staff_alert(request=request))
    return request


def quota_request_staff_alert(*, request: QuotaRequest, overdue: bool = False) -> int:
    """E-mail every active staff member that a request waits, with its deadline: the seed promises a
    decision within ``INSTANCES_QUOTA_REVIEW_SLA_MIN`` minutes, so nobody should have to poll the queue.

    One message per staff member (not one with everyone in To:), so no address is shown to the others.
    Mail failing must not fail the user's request: it is logged, and the staff menu's badge still counts it.
    Returns the number of messages sent.
    """
    User = get_user_model()
    recipients = list(User.objects.filter(is_staff=True, is_active=True).exclude(email=""))
    if not recipients:
        return 0
    sla = settings.INSTANCES_QUOTA_REVIEW_SLA_MIN
    due = timezone.localtime(request.created_at + timedelta(minutes=sla))
    values = {
        "user": account_label(request.user),
        "n": request.cards,
        "gpu": request.gpu_model.name,
        "days": request.duration_days,
        "reason": request.reason,
        "due": due.strftime("%Y-%m-%d %H:%M"),
        "sla": sla,
        "url": reverse("quota_review"),
    }
    messages = []
    for staff in recipients:
        # In the staff member's language (or the console's), not the requester's, which is active here.
        with override(getattr(staff, "language", None) or settings.LANGUAGE_CODE):
            if overdue:
                subject = _("Overdue quota request: %(user)s has waited over %(sla)d minutes for %(n)d %(gpu)s cards")
            else:
                subject = _("Quota request: %(user)s asks for %(n)d %(gpu)s cards")
            subject %= values
            body = (
                _(
                    "%(user)s asks for %(n)d %(gpu)s cards for %(days)d days.\n\nReason: %(reason)s\n\n"
                    "Please decide by %(due)s (within %(sla)d minutes) on the console's review page, %(url)s."
                )
                % values
            )
        messages.append(EmailMessage(subject, body, None, [staff.email]))
    try:
        with get_connection() as mail:
            return mail.send_messages(messages) or 0
    except Exception:
        logger.warning("staff alert for quota request %s could not be sent", request.pk, exc_info=True)
        return 0


def quota_requests_overdue_escalate(*, now: datetime | None = None) -> int:
    """Periodic: e-mail staff once more about each request still waiting past the SLA.

    Once per request: the escalation is recorded as an ``overdue`` audit row, written under the
    request's row lock with the check that none exists, so repeated or concurrent runs send one mail.
    Returns the number of requests escalated.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.INSTANCES_QUOTA_REVIEW_SLA_MIN)
    late = (
        QuotaRequest.objects.filter(status=QuotaRequest.Status.PENDING, created_at__lte=cutoff)
        .exclude(audit__action="overdue")
        .values_list("pk", flat=True)
    )
    escalated = 0
    for request_id in list(late):
        with transaction.atomic():
            request = (
                QuotaRequest.objects.select_for_update()
                .select_related("user", "gpu_model")
                .filter(pk=request_id, status=QuotaRequest.Status.PENDING)
                .first()
            )
            if request is None or request.audit.filter(action="overdue").exists():
                continue  # decided meanwhile, or another run escalated it first
            _quota_audit(request=request, actor=None, action="overdue", sla_min=settings.INSTANCES_QUOTA_REVIEW_SLA_MIN)
            transaction.on_commit(lambda request=request: quota_request_staff_alert(request=request, overdue=True))
            escalated += 1
    return escalated


def _quota_decided_notify(request: QuotaRequest) -> None:
    """Tell the requester (in their language, whoever decided): approved, declined or expired."""

    def render() -> Message:
        gpu = request.gpu_model.name
        if request.status == QuotaRequest.Status.APPROVED:
            subject = _("Your %(gpu)s quota request was approved") % {"gpu": gpu}
            body = _("You may now hold up to %(n)d %(gpu)s cards until %(until)s.") % {
                "n": request.granted_cards,
                "gpu": gpu,
                "until": timezone.localtime(request.expires_at).strftime("%Y-%m-%d %H:%M"),
            }
            for reservation in request.reservations.select_related("region"):
                body += " " + _("%(n)d of them are reserved for you in %(region)s from %(from)s until %(until)s.") % {
                    "n": reservation.cards,
                    "region": reservation.region.name,
                    "from": timezone.localtime(reservation.starts_at).strftime("%Y-%m-%d %H:%M"),
                    "until": timezone.localtime(reservation.ends_at).strftime("%Y-%m-%d %H:%M"),
                }
        elif request.status == QuotaRequest.Status.DENIED:
            subject = _("Your %(gpu)s quota request was declined") % {"gpu": gpu}
            body = _("Your request for %(n)d cards was declined.") % {"n": request.cards}
        else:
            subject = _("Your extra %(gpu)s quota has expired") % {"gpu": gpu}
            body = _("Your quota for %(gpu)s is back to the standard amount.") % {"gpu": gpu}
        if request.message:
            body += "\n\n" + request.message
        return Message(title=subject, body=body)

    notify(
        user=request.user,
        kind=Kind.QUOTA_DECIDED,
        render=render,
        link="/quota/",
        data={"quota_request_id": request.pk, "status": request.status, "gpu_model": request.gpu_model.name},
    )


def quota_request_approve(
    *,
    request_id: int,
    staff,
    cards: int | None = None,
    days: int | None = None,
    message: str = "",
    reserve_region: Region | None = None,
    reserve_starts_at: datetime | None = None,
    reserve_ends_at: datetime | None = None,
) -> QuotaRequest:
    """Grant ``cards`` (at most what was asked) until ``days`` from now. Only a pending request moves.

    With ``reserve_region``, the granted cards are also reserved there (``instances.capacity.reservations``) for
    the grant's window, or the part of it between ``reserve_starts_at`` and ``reserve_ends_at``; when
    the region cannot promise them, nothing is approved."""
    with transaction.atomic():
        request = QuotaRequest.objects.select_for_update().select_related("user", "gpu_model").get(pk=request_id)
        if request.status != QuotaRequest.Status.PENDING:
            raise OperationNotAllowed(_("This request was already decided."))
        cards = request.cards if cards is None else cards
        days = request.duration_days if days is None else days
        if not (1 <= cards <= request.cards):
            raise QuotaRequestInvalid(_("Grant between 1 and %(n)d cards.") % {"n": request.cards}, field="cards")
        if not (1 <= days <= settings.INSTANCES_QUOTA_MAX_DAYS):
            raise QuotaRequestInvalid(
                _("Choose between 1 and %(n)d days.") % {"n": settings.INSTANCES_QUOTA_MAX_DAYS}, field="days"
            )
        now = timezone.now()
        request.status = QuotaRequest.Status.APPROVED
        request.granted_cards = cards
        request.expires_at = now + timedelta(days=days)
        request.decided_by, request.decided_at, request.message = staff, now, message.strip()
        request.save(update_fields=["status", "granted_cards", "expires_at", "decided_by", "decided_at", "message"])
        _quota_audit(request=request, actor=staff, action="approved", cards=cards, days=days, message=request.message)
        if reserve_region is not None:
            starts_at, ends_at = reserve_starts_at or now, reserve_ends_at or request.expires_at
            if starts_at < now - timedelta(minutes=5) or ends_at > request.expires_at:
                raise QuotaRequestInvalid(
                    _("Reserve within the grant's window, from now until %(until)s.")
                    % {"until": timezone.localtime(request.expires_at).strftime("%Y-%m-%d %H:%M")},
                    field="reserve_ends_at",
                )
            try:
                reservation = reservation_create(
                    account=request.user,
                    region=reserve_region,
                    gpu_model=request.gpu_model,
                    cards=cards,
                    starts_at=max(starts_at, now),
                    ends_at=ends_at,
                    staff=staff,
                    note=request.message,
                    quota_request=request,
                )
            except ReservationInvalid as exc:  # named as the approval's fields: the reservation's own are these
                field = {"region": "reserve_region", "ends_at": "reserve_ends_at"}.get(exc.field or "", exc.field)
                raise ReservationInvalid(exc.message, field=field) from exc
            _quota_audit(request=request, actor=staff, action="reserved", reservation=reservation.pk)
        transaction.on_commit(lambda: _quota_decided_notify(request))
    return request


def quota_request_deny(*, request_id: int, staff, message: str) -> QuotaRequest:
    if not (message or "").strip():
        raise QuotaRequestInvalid(_("Tell the user why."), field="message")
    with transaction.atomic():
        request = QuotaRequest.objects.select_for_update().select_related("user", "gpu_model").get(pk=request_id)
        if request.status != QuotaRequest.Status.PENDING:
            raise OperationNotAllowed(_("This request was already decided."))
        request.status = QuotaRequest.Status.DENIED
        request.decided_by, request.decided_at, request.message = staff, timezone.now(), message.strip()
        request.save(update_fields=["status", "decided_by", "decided_at", "message"])
        _quota_audit(request=request, actor=staff, action="denied", message=request.message)
        transaction.on_commit(lambda: _quota_decided_notify(request))
    return request


def quota_grants_expire(*, now: datetime | None = None) -> int:
    """Periodic: mark ended grants expired (the effective quota already ignores them) and tell the user."""
    now = now or timezone.now()
    expired = 0
    for request_id in QuotaRequest.objects.filter(status=QuotaRequest.Status.APPROVED, expires_at__lte=now).values_list(
        "pk", flat=True
    ):
        with transaction.atomic():
            moved = QuotaRequest.objects.filter(pk=request_id, status=QuotaRequest.Status.APPROVED).update(
                status=QuotaRequest.Status.EXPIRED
            )
            if moved:
                request = QuotaRequest.objects.select_related("user", "gpu_model").get(pk=request_id)
                _quota_audit(request=request, actor=None, action="expired")
                transaction.on_commit(lambda request=request: _quota_decided_notify(request))
                expired += 1
    return expired
