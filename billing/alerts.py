"""Running out of money: warn when the runway gets short, stop what runs when the money is gone.

``balance_alerts_update`` runs after each settlement tick (its own periodic task). For every user
with something running or owing it computes the runway (``billing.selectors.runways_all``, two
queries for everyone) and keeps one ``BalanceAlert`` episode per kind:

- LOW: the runway fell below ``BILLING_LOW_BALANCE_WARNING_S``. One notification (inbox, e-mail in
  the user's language, webhook: ``notifications.notify``) per episode; the episode
  ends when the runway is back above the threshold (a top-up) or nothing runs any more, so the next
  shortage warns again. The console's banner reads ``billing.selectors.low_balance_warning_active``.
- EXHAUSTED: the runway is zero, or the meters owe more than the balance. After
  ``BILLING_OUT_OF_FUNDS_GRACE_S`` the hook ``billing.hooks.out_of_funds`` is called once with
  ``user_id=…``, and the user is notified. The instances app answers it (stop the user's instances,
  keep their disks, then ``meters_stop_unpaid``: the open meters that are not storage). The operator's
  one choice is ``BILLING_OUT_OF_FUNDS_POLICY``: ``stop`` (the default) or ``notify`` (the user is told,
  nothing is stopped and the usage becomes debt: a console whose users are billed afterwards).

The unique open episode per (user, kind) and compare-and-set updates make repeats and concurrent
runs harmless: one e-mail, one hook call per episode.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.hooks import out_of_funds
from billing.models import BalanceAlert, Meter
from billing.selectors import Runway, runways_all
from billing.services import meter_stop
from core.formatting import cny, duration
from notifications.models import Kind
from notifications.services import Message, notify

logger = logging.getLogger(__name__)

Alert = BalanceAlert.Kind


@dataclass
class AlertReport:
    users_checked: int = 0
    warned: int = 0  # low-balance e-mails sent
    exhausted: int = 0  # out-of-funds episodes begun
    hooks_called: int = 0
    resolved: int = 0


def is_low(runway: Runway) -> bool:
    """Something runs and the balance lasts less than ``BILLING_LOW_BALANCE_WARNING_S``."""
    seconds = runway.seconds
    return seconds is not None and seconds < settings.BILLING_LOW_BALANCE_WARNING_S


def is_exhausted(runway: Runway) -> bool:
    """Nothing left: a running meter's runway is zero, or what is owed exceeds the balance."""
    return runway.seconds == 0 or runway.balance_fen < 0


def balance_alerts_update(*, now: datetime | None = None) -> AlertReport:
    """Open, notify, act on and resolve the users' low-balance and out-of-funds episodes."""
    now = now or timezone.now()
    report = AlertReport()
    runways = runways_all(now=now)
    open_alerts = {(a.user_id, a.kind): a for a in BalanceAlert.objects.filter(resolved_at__isnull=True).order_by("pk")}
    empty = Runway(balance_fen=0, burn_fen_per_hour=0, owed_fen=0)  # nothing runs, nothing owed
    users = set(runways) | {user_id for user_id, _ in open_alerts}
    report.users_checked = len(users)

    to_resolve = []
    for user_id in sorted(users):
        runway = runways.get(user_id, empty)
        for kind, active in ((Alert.LOW, is_low(runway)), (Alert.EXHAUSTED, is_exhausted(runway))):
            alert = open_alerts.get((user_id, kind))
            if active and alert is None:
                alert = _episode_open(user_id=user_id, kind=kind, runway=runway, now=now)
                if alert is not None and kind == Alert.EXHAUSTED:
                    report.exhausted += 1
            elif not active and alert is not None:
                to_resolve.append(alert.pk)
                continue
            if alert is None or alert.notified_at is not None:
                continue
            if kind == Alert.LOW:
                report.warned += _warn(alert=alert, runway=runway, now=now)
            elif now - alert.started_at >= timedelta(seconds=settings.BILLING_OUT_OF_FUNDS_GRACE_S):
                report.hooks_called += _out_of_funds(alert=alert, now=now)
    if to_resolve:
        report.resolved = BalanceAlert.objects.filter(pk__in=to_resolve, resolved_at__isnull=True).update(
            resolved_at=now
        )
    return report


def _episode_open(*, user_id: int, kind: str, runway: Runway, now: datetime) -> BalanceAlert | None:
    try:
        with transaction.atomic():
            return BalanceAlert.objects.create(user_id=user_id, kind=kind, started_at=now, runway_s=runway.seconds)
    except IntegrityError:  # another watcher opened it a moment ago: theirs to notify
        return None


def _claim(*, alert: BalanceAlert, now: datetime) -> bool:
    """Compare-and-set ``notified_at``: exactly one watcher wins the right to notify."""
    return bool(BalanceAlert.objects.filter(pk=alert.pk, notified_at__isnull=True).update(notified_at=now))


def _release(*, alert: BalanceAlert) -> None:
    BalanceAlert.objects.filter(pk=alert.pk).update(notified_at=None)


def _warn(*, alert: BalanceAlert, runway: Runway, now: datetime) -> int:
    if not _claim(alert=alert, now=now):
        return 0
    user = get_user_model().objects.get(pk=alert.user_id)

    def render() -> Message:
        context = {
            "site": settings.CONSOLE_SITE_NAME,
            "balance": cny(max(runway.balance_fen, 0)),
            "runway": duration(runway.seconds or 0),  # words of the recipient's language
            "burn": cny(runway.burn_fen_per_hour),
        }
        body = (
            _(
                "Hello,\n\nAt the current rate of %(burn)s per hour, your balance of %(balance)s lasts about "
                "%(runway)s. When it runs out, your running instances are stopped (their disks are kept).\n\n"
                "Top up on the Billing page of %(site)s to keep them running.\n"
            )
            % context
        )
        return Message(
            title=_("Your balance runs out in %(runway)s") % context,
            body=body,
            mail_subject=_("[%(site)s] Your balance runs out in %(runway)s") % context,
        )

    try:
        notify(
            user=user,
            kind=Kind.LOW_BALANCE,
            render=render,
            link="/billing/",
            data={
                "balance_fen": runway.balance_fen,
                "burn_fen_per_hour": runway.burn_fen_per_hour,
                "runway_s": runway.seconds,
            },
        )
    except Exception:
        logger.exception("low-balance notification to user %s failed; retried at the next run", user.pk)
        _release(alert=alert)
        return 0
    logger.info("low-balance warning sent to user %s (runway %s s)", user.pk, runway.seconds)
    return 1


def _out_of_funds(*, alert: BalanceAlert, now: datetime) -> int:
    if not _claim(alert=alert, now=now):
        return 0
    stop = out_of_funds_policy() == OUT_OF_FUNDS_STOP
    if stop:
        try:
            out_of_funds(user_id=alert.user_id)
        except Exception:
            logger.exception("out-of-funds hook for user %s failed; retried at the next run", alert.user_id)
            _release(alert=alert)
            return 0
        logger.warning("user %s out of funds since %s: what runs was stopped", alert.user_id, alert.started_at)
    else:
        logger.warning("user %s out of funds since %s: told, nothing stopped (policy)", alert.user_id, alert.started_at)
    user = get_user_model().objects.filter(pk=alert.user_id).first()
    if user is not None:
        notify(
            user=user,
            kind=Kind.OUT_OF_FUNDS,
            render=_stopped_message if stop else _running_message,
            link="/billing/",
            data={"started_at": alert.started_at.isoformat(), "stopped": stop},
        )
    return 1 if stop else 0  # hooks called


OUT_OF_FUNDS_STOP = "stop"  # stop what runs (the out-of-funds hook), keep disks: the default
OUT_OF_FUNDS_NOTIFY = "notify"  # tell the user only: usage goes on and becomes debt
OUT_OF_FUNDS_POLICIES = (OUT_OF_FUNDS_STOP, OUT_OF_FUNDS_NOTIFY)


def out_of_funds_policy() -> str:
    """``BILLING_OUT_OF_FUNDS_POLICY``, the operator's one choice about running out of money (the
    settings refuse any other value at load), read here only."""
    return getattr(settings, "BILLING_OUT_OF_FUNDS_POLICY", OUT_OF_FUNDS_STOP)


def _stopped_message() -> Message:
    return Message(
        title=_("Your balance ran out: your instances were stopped"),
        body=_(
            "Your balance is used up, so your running instances were stopped. Their disks are kept "
            "(storage is still billed). Top up on the Billing page to start them again."
        ),
    )


def _running_message() -> Message:
    return Message(
        title=_("Your balance ran out"),
        body=_(
            "Your balance is used up. Your instances keep running and what they use is still charged, "
            "so your balance goes below zero: top up on the Billing page."
        ),
    )


def meters_stop_unpaid(*, user_id: int) -> list[str]:
    """Stop the user's open meters that are not storage: what the out-of-funds hook's answer calls
    last (instances stops the machines, keeping their disks, then closes whatever meter is left).
    Returns the refs stopped.
    """
    refs = list(
        Meter.objects.filter(user_id=user_id, stopped_at__isnull=True, sku__is_storage=False).values_list(
            "ref", flat=True
        )
    )
    for ref in refs:
        meter_stop(ref=ref)
    if refs:
        logger.warning("user %s out of funds: stopped meters %s", user_id, ", ".join(refs))
    return refs
