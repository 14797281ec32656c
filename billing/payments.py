"""Top-ups: orders, the gateway's webhooks, crediting and refunds.

The money path: ``topup_order_create`` makes a pending order and asks the gateway for a checkout
URL; the gateway's signed webhook reaches ``topup_webhook_receive``, which records the event id (the
replay guard), moves the order to ``paid`` and posts GATEWAY → the user's CASH under the ledger key
``topup:order:<id>``. However many times, and however concurrently, a webhook arrives, the wallet is
credited once. ``topup_refund`` sends paid money back (CASH → GATEWAY), never trial credit.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.gateways import GatewayError, PaymentQuery, WebhookEvent, WebhookRejected, gateway_get, gateways_enabled
from billing.gateways.base import RefundAnswer
from billing.models import LedgerAccount, Refund, TopUpOrder, Transaction
from billing.models import WebhookEvent as WebhookEventRow
from billing.services import BillingError, account_get, ledger_post
from core import statemachine
from core.tasks import enqueue_on_commit
from identity.services import real_name_check

if TYPE_CHECKING:
    from billing.gateways.simulated import SimulatedGateway

logger = logging.getLogger(__name__)

Kind = LedgerAccount.Kind
Status = TopUpOrder.Status


class InvalidAmount(BillingError):
    code = "invalid_amount"


class RefundRefused(BillingError):
    code = "refund_refused"


class InvalidGateway(BillingError):
    code = "invalid_gateway"


class InvalidTransition(BillingError, statemachine.InvalidTransition):
    code = "invalid_transition"


# --- Amounts --------------------------------------------------------------------------------------

_YUAN = re.compile(r"^([0-9]{1,12})(?:\.([0-9]{1,2}))?$")


def yuan_to_fen(text: str) -> int:
    """Parse an amount typed in yuan (``"50"``, ``"50.5"``, ``"¥1,000.00"``) into integer fen, without float.

    Raises ``InvalidAmount`` for anything else: negatives, more than two decimals, exponents, words.
    """
    # NFKC folds what a Chinese input method types (full-width digits, "．", "￥", "，") into ASCII.
    cleaned = unicodedata.normalize("NFKC", str(text)).strip().replace(",", "").removeprefix("¥").strip()
    match = _YUAN.match(cleaned)
    if not match:
        raise InvalidAmount(_("Enter an amount in yuan, such as 50 or 99.90."))
    whole, decimals = match.group(1), (match.group(2) or "").ljust(2, "0")
    return int(whole) * 100 + int(decimals)


def topup_limits() -> tuple[int, int]:
    """The smallest and largest top-up, in fen."""
    return int(settings.BILLING_TOPUP_MIN_FEN), int(settings.BILLING_TOPUP_MAX_FEN)


def topup_amount_check(*, amount_fen: int) -> int:
    low, high = topup_limits()
    if amount_fen < low or amount_fen > high:
        raise InvalidAmount(
            _("A top-up is between ¥%(low)s and ¥%(high)s.")
            % {"low": f"{low / 100:,.0f}", "high": f"{high / 100:,.0f}"}
        )
    return amount_fen


# --- Orders ---------------------------------------------------------------------------------------


def topup_order_transition(*, order_id: int, src: str, dst: str, **changes) -> bool:
    """Move an order from ``src`` to ``dst`` if it is still in ``src`` (compare-and-set).

    ``False`` means someone moved it first. A move the table does not allow raises ``InvalidTransition``.
    """
    return statemachine.transition(
        model=TopUpOrder,
        pk=order_id,
        table=TopUpOrder.TRANSITIONS,
        src=src,
        dst=dst,
        changes={"updated_at": timezone.now(), **changes},
        error=InvalidTransition,
    )


def topup_order_create(
    *, user, amount_fen: int, return_url: str = "", gateway_name: str | None = None, payer=None
) -> tuple[TopUpOrder, str]:
    """Open a pending top-up of ``amount_fen`` and return it with the gateway's checkout URL.

    ``payer`` is the person paying (``user`` when not given; a member when ``user`` is a team's
    account): where a real name is required before paid use (``IDENTITY_REAL_NAME_REQUIRED``), theirs
    must be verified, else ``identity.errors.RealNameRequired``.

    ``gateway_name`` picks one of the enabled gateways (the default one when ``None``; a name not
    enabled raises ``InvalidGateway``). ``return_url`` is where the payer's browser comes back;
    ``{order}`` in it becomes the order's id. A QR gateway returns that page, which shows the code.
    """
    if not isinstance(amount_fen, int) or isinstance(amount_fen, bool):
        raise TypeError("amounts are integers (fen)")
    topup_amount_check(amount_fen=amount_fen)
    real_name_check(user=payer if payer is not None else user)
    try:
        gateway = gateway_get(gateway_name)
    except LookupError:
        raise InvalidGateway(_("Choose one of the payment methods offered.")) from None
    order = TopUpOrder.objects.create(user=user, amount_fen=amount_fen, gateway=gateway.name)
    try:
        checkout_url = gateway.create_checkout(order=order, return_url=return_url.replace("{order}", str(order.pk)))
    except GatewayError:
        # No checkout exists, so no payment can arrive for it: close the order rather than leave it pending.
        topup_order_transition(order_id=order.pk, src=Status.PENDING, dst=Status.FAILED, failed_at=timezone.now())
        raise
    if order.gateway_reference or order.checkout_qr:
        TopUpOrder.objects.filter(pk=order.pk).update(
            gateway_reference=order.gateway_reference, checkout_qr=order.checkout_qr
        )
    return order, checkout_url


def topup_orders_expire(*, older_than: timedelta | None = None) -> int:
    """Settle pending orders older than ``older_than`` (the order TTL by default) by asking their gateway.

    Paid at the gateway (the notification was lost): credited now, as a notification would.
    Closed or still open: closed at the gateway, so a late scan can no longer pay, then ``expired``.
    A gateway that cannot answer, or is no longer enabled, leaves the order pending for the next
    sweep: not knowing is not "unpaid". Returns how many orders were expired. Safe to repeat.
    """
    cutoff = timezone.now() - (older_than or timedelta(seconds=int(settings.BILLING_TOPUP_ORDER_TTL_S)))
    expired = 0
    for order_id in TopUpOrder.objects.filter(status=Status.PENDING, created_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        if topup_order_sweep(order_id=order_id) == "expired":
            expired += 1
    return expired


def topup_order_sweep(*, order_id: int) -> str:
    """Query one pending order's gateway and credit, or close and expire, it; returns what happened.

    ``credited``, ``expired``, ``unknown`` (the gateway could not say) or ``ignored`` (no longer pending).
    """
    order = TopUpOrder.objects.get(pk=order_id)
    if order.status != Status.PENDING:
        return "ignored"
    try:
        gateway = gateway_get(order.gateway)
        answer = gateway.query(order=order)
        if answer.state != PaymentQuery.PAID:
            gateway.close(order=order)
    except (LookupError, GatewayError) as exc:
        logger.warning("top-up order %s: its gateway %s could not be asked: %s", order.pk, order.gateway, exc)
        return "unknown"
    if answer.state == PaymentQuery.PAID:
        event = WebhookEvent(
            id=f"query:{answer.reference or order.pk}",
            type=WebhookEvent.PAYMENT_SUCCEEDED,
            order_id=order.pk,
            amount_fen=answer.amount_fen,
            currency=answer.currency,
            reference=answer.reference,
        )
        digest = hashlib.sha256(f"{order.pk}:{answer.amount_fen}:{answer.currency}:{answer.reference}".encode())
        try:
            return event_apply(gateway_name=gateway.name, event=event, digest=digest.hexdigest()).result
        except WebhookRejected as exc:
            logger.error("top-up order %s: the gateway reports a payment that does not match: %s", order.pk, exc)
            return "unknown"
    moved = topup_order_transition(order_id=order.pk, src=Status.PENDING, dst=Status.EXPIRED)
    return "expired" if moved else "ignored"


# --- Webhooks -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookOutcome:
    """What a webhook did: ``credited``, ``failed``, ``duplicate`` (seen before) or ``ignored`` (nothing to do)."""

    result: str
    event: WebhookEvent
    order_id: int


def topup_webhook_receive(*, gateway_name: str, body: bytes, headers: Mapping[str, str]) -> WebhookOutcome:
    """Verify, record and apply one webhook delivery. Raises ``WebhookRejected`` and changes nothing when bad.

    The order row is locked first, so two deliveries of events for one order apply one after the
    other; the event id's unique row makes a redelivery a no-op; the ledger key makes crediting
    once a database guarantee even if two different event ids both say "paid".
    """
    try:
        gateway = gateway_get(gateway_name)
    except LookupError:
        raise WebhookRejected("unknown_gateway", "No such payment gateway.", status=404) from None
    event = gateway.verify_webhook(body=body, headers=headers)
    return event_apply(gateway_name=gateway.name, event=event, digest=hashlib.sha256(body).hexdigest())


def event_apply(*, gateway_name: str, event: WebhookEvent, digest: str) -> WebhookOutcome:
    """Record and apply one authenticated event (from a webhook, or from asking the gateway).

    ``digest`` identifies the event's content, so the same id with another content is a conflict.
    """
    with transaction.atomic():
        order = TopUpOrder.objects.select_for_update().filter(pk=event.order_id, gateway=gateway_name).first()
        if order is None:
            raise WebhookRejected("unknown_order", "No such order.", status=404)
        try:
            with transaction.atomic():
                WebhookEventRow.objects.create(
                    gateway=gateway_name, event_id=event.id, event_type=event.type, order=order, payload_sha256=digest
                )
        except IntegrityError:
            seen = WebhookEventRow.objects.get(gateway=gateway_name, event_id=event.id)
            if seen.payload_sha256 != digest:
                raise WebhookRejected(
                    "event_conflict", "This event id was already delivered with another body.", status=409
                ) from None
            return WebhookOutcome(result="duplicate", event=event, order_id=order.pk)
        if event.type == WebhookEvent.PAYMENT_PENDING:
            return WebhookOutcome(result="ignored", event=event, order_id=order.pk)
        if event.type == WebhookEvent.REFUND_UPDATED:
            # Never trusted for the outcome: the refund is settled from the gateway's own answer.
            for refund_id in order.refunds.filter(status=Refund.Status.PENDING).values_list("pk", flat=True):
                enqueue_on_commit("billing.tasks.refund_confirm_task", refund_id)
            return WebhookOutcome(result="refund_checked", event=event, order_id=order.pk)
        if event.amount_fen != order.amount_fen or event.currency != order.currency:
            # Raising rolls back the event row too: a bad event changes nothing. Logged loudly: either
            # the gateway's account is misconfigured or someone is probing with a signed but altered order.
            logger.error(
                "gateway %s event %s for order %s: paid %s %s, the order is %s %s; refused",
                gateway_name,
                event.id,
                order.pk,
                event.amount_fen,
                event.currency,
                order.amount_fen,
                order.currency,
            )
            raise WebhookRejected("amount_mismatch", "The paid amount does not match the order.", status=400)
        if event.type == WebhookEvent.PAYMENT_SUCCEEDED:
            return WebhookOutcome(result=_order_credit(order=order, event=event), event=event, order_id=order.pk)
        if order.status == Status.PENDING:
            topup_order_transition(order_id=order.pk, src=Status.PENDING, dst=Status.FAILED, failed_at=timezone.now())
            return WebhookOutcome(result="failed", event=event, order_id=order.pk)
        return WebhookOutcome(result="ignored", event=event, order_id=order.pk)


def topup_checkout_simulate(*, gateway: SimulatedGateway, order: TopUpOrder, approve: bool) -> WebhookOutcome:
    """The simulated checkout's Approve or Decline: the webhook the gateway would send, received here.

    The gateway only builds the signed request; this hands it to ``topup_webhook_receive`` as the
    webhook endpoint does, so the demo top-up runs the real path (verification, replay protection,
    crediting once). The gateway calls no service back: payments use gateways, never the reverse.
    """
    body, headers = gateway.webhook_build(order=order, approve=approve)
    return topup_webhook_receive(gateway_name=gateway.name, body=body, headers=headers)


def _order_credit(*, order: TopUpOrder, event: WebhookEvent) -> str:
    """Credit a paid order's money to its owner's wallet; the caller holds the order's lock."""
    if order.status not in (Status.PENDING, Status.FAILED, Status.EXPIRED):
        return "ignored"  # paid (or refunded) already
    ledger_post(
        key=f"topup:order:{order.pk}",
        kind=Transaction.Kind.TOPUP,
        user=order.user,
        legs=[
            (account_get(kind=Kind.GATEWAY), -order.amount_fen),
            (account_get(user=order.user, kind=Kind.CASH), order.amount_fen),
        ],
        description=f"Top-up #{order.pk}",
        metadata={"order": order.pk, "gateway": order.gateway, "event": event.id, "reference": event.reference},
    )
    topup_order_transition(
        order_id=order.pk,
        src=order.status,
        dst=Status.PAID,
        paid_at=timezone.now(),
        gateway_reference=event.reference or order.gateway_reference,
    )
    return "credited"


# --- Refunds --------------------------------------------------------------------------------------


def topup_refund(*, order: TopUpOrder, amount_fen: int, reason: str, key: str | None = None, created_by=None) -> Refund:
    """Send ``amount_fen`` of a paid order back to the payer through the gateway.

    Only paid money still in the wallet can go back: at most what remains of the order and at most
    the CASH balance; trial credit is never touched. Idempotent by ``key`` (by default the order,
    amount and reason: asking twice refunds once; pass a distinct key for a second, equal part).
    The gateway is called inside the transaction, after the posting: if it refuses, nothing is
    posted; if we crash after it agreed, the retry's same key gets the same refund back.
    """
    if not isinstance(amount_fen, int) or isinstance(amount_fen, bool) or amount_fen <= 0:
        raise RefundRefused(_("A refund is a positive amount."))
    reason = reason.strip()
    if not reason:
        raise RefundRefused(_("Say why the money goes back."))
    key = key or f"order:{order.pk}:{amount_fen}:{hashlib.sha256(reason.encode()).hexdigest()[:16]}"
    existing = Refund.objects.filter(key=key).first()
    if existing is not None:
        return existing
    try:
        gateway = gateway_get(order.gateway)
    except LookupError:
        raise RefundRefused(_("This order was paid through a gateway that is no longer enabled.")) from None
    with transaction.atomic():
        order = TopUpOrder.objects.select_for_update().get(pk=order.pk)
        existing = Refund.objects.filter(key=key).first()
        if existing is not None:
            return existing
        if order.status not in (Status.PAID, Status.PARTIALLY_REFUNDED):
            raise RefundRefused(_("Only a paid top-up can be refunded."))
        remaining = order.amount_fen - order.refunded_fen
        if amount_fen > remaining:
            raise RefundRefused(
                _("At most ¥%(amount)s of this top-up can still be refunded.") % {"amount": f"{remaining / 100:.2f}"}
            )
        cash = account_get(user=order.user, kind=Kind.CASH)
        cash_balance = LedgerAccount.objects.select_for_update().values_list("balance", flat=True).get(pk=cash.pk)
        if amount_fen > cash_balance:
            raise RefundRefused(
                _("Only the paid balance still in the wallet (¥%(amount)s) can be refunded.")
                % {"amount": f"{max(cash_balance, 0) / 100:.2f}"}
            )
        txn, _created = ledger_post(
            key=f"topup:refund:{key}",
            kind=Transaction.Kind.REFUND,
            user=order.user,
            legs=[(cash, -amount_fen), (account_get(kind=Kind.GATEWAY), amount_fen)],
            description=f"Refund of top-up #{order.pk}",
            metadata={"order": order.pk, "reason": reason[:255]},
            created_by=created_by,
        )
        # The gateway's refund API is the last step inside the transaction: the posting above commits
        # only when the gateway confirms; a refusal (GatewayError, raised to the caller) rolls it back.
        answer = gateway.refund(order=order, amount_fen=amount_fen, key=key)
        if not isinstance(answer, RefundAnswer):
            answer = RefundAnswer(id=str(answer))
        if answer.state == RefundAnswer.FAILED:
            raise GatewayError(f"the gateway refused the refund ({answer.id})")
        pending = answer.state == RefundAnswer.PENDING
        refund = Refund.objects.create(
            order=order,
            amount_fen=amount_fen,
            reason=reason[:255],
            key=key,
            gateway_refund_id=answer.id[:200],
            status=Refund.Status.PENDING if pending else Refund.Status.SUCCEEDED,
            settled_at=None if pending else timezone.now(),
            transaction=txn,
            created_by=created_by,
        )
        dst = Status.REFUNDED if amount_fen == remaining else Status.PARTIALLY_REFUNDED
        topup_order_transition(
            order_id=order.pk,
            src=order.status,
            dst=dst,
            refunded_fen=F("refunded_fen") + amount_fen,
            refunded_at=timezone.now(),
        )
    return refund


def refunds_confirm() -> dict[str, int]:
    """Ask the gateways about every pending refund; settle those they answered. Safe to repeat.

    Returns how many ``succeeded``, ``failed`` and stayed ``pending``.
    """
    counts = {"succeeded": 0, "failed": 0, "pending": 0}
    for refund_id in Refund.objects.filter(status=Refund.Status.PENDING).values_list("pk", flat=True):
        counts[refund_confirm(refund_id=refund_id)] += 1
    return counts


def refund_confirm(*, refund_id: int) -> str:
    """Settle one pending refund from its gateway's answer: ``succeeded``, ``failed`` (reversed) or ``pending``.

    A failed refund is undone by a new posting (GATEWAY → CASH, key ``topup:refund-reversal:<key>``)
    and the order's refunded amount shrinks back, in one transaction with the refund's row lock.
    """
    refund = Refund.objects.select_related("order").get(pk=refund_id)
    if refund.status != Refund.Status.PENDING:
        return refund.status
    try:
        state = gateway_get(refund.order.gateway).refund_state(
            order=refund.order, refund_id=refund.gateway_refund_id, key=refund.key
        )
    except (LookupError, GatewayError) as exc:
        logger.warning("refund %s: its gateway could not say: %s", refund.pk, exc)
        return "pending"
    if state == RefundAnswer.PENDING:
        return "pending"
    with transaction.atomic():
        order = TopUpOrder.objects.select_for_update().get(pk=refund.order_id)
        refund = Refund.objects.select_for_update().get(pk=refund.pk)
        if refund.status != Refund.Status.PENDING:
            return refund.status
        if state == RefundAnswer.SUCCEEDED:
            Refund.objects.filter(pk=refund.pk).update(status=Refund.Status.SUCCEEDED, settled_at=timezone.now())
            return "succeeded"
        ledger_post(
            key=f"topup:refund-reversal:{refund.key}",
            kind=Transaction.Kind.REFUND,
            user=order.user,
            legs=[
                (account_get(kind=Kind.GATEWAY), -refund.amount_fen),
                (account_get(user=order.user, kind=Kind.CASH), refund.amount_fen),
            ],
            description=f"Refund of top-up #{order.pk} failed at the gateway: reversed",
            metadata={"order": order.pk, "refund": refund.pk},
        )
        left = order.refunded_fen - refund.amount_fen
        topup_order_transition(
            order_id=order.pk,
            src=order.status,
            dst=Status.PARTIALLY_REFUNDED if left else Status.PAID,
            refunded_fen=F("refunded_fen") - refund.amount_fen,
        )
        Refund.objects.filter(pk=refund.pk).update(status=Refund.Status.FAILED, settled_at=timezone.now())
        logger.error("refund %s of order %s failed at the gateway; reversed in the ledger", refund.pk, order.pk)
        return "failed"


def gateway_certificates_refresh() -> int:
    """Each enabled gateway that keeps its provider's certificates (WeChat Pay's platform ones)
    fetches the newer ones; the number of new certificates. Run by beat: a notification never
    triggers a download (billing.gateways.wechatpay says why)."""
    written = 0
    for gateway in gateways_enabled():
        refresh = getattr(gateway, "platform_certificates_refresh", None)
        if refresh is not None and not gateway.is_configured():
            written += refresh()
    return written
