"""The payment gateway contract, and the signed-webhook scheme the embedded gateways share.

A gateway takes money from a payer for a ``TopUpOrder`` and tells the console, by a signed webhook,
whether it arrived. The console never trusts the browser's return from a checkout: only a webhook
that verifies credits a wallet, and crediting is keyed by the order, so redeliveries are harmless.

Webhook signature (the shape Stripe popularised, so real adapters map onto it)::

    X-Console-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>

The timestamp is inside the MAC, so a captured request cannot be replayed with a fresh time, and
requests older (or newer) than ``BILLING_GATEWAY_WEBHOOK_TOLERANCE_S`` are refused; within the
window the event-id table refuses replays.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.urls import reverse
from django.utils.crypto import salted_hmac

if TYPE_CHECKING:
    from billing.models import TopUpOrder

SIGNATURE_HEADER = "X-Console-Signature"


class GatewayError(Exception):
    """The gateway refused or could not be reached. ``transient`` errors may be retried with the same key."""

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class WebhookRejected(Exception):
    """A webhook that must change nothing: answered with ``status`` and a JSON error ``code``."""

    def __init__(self, code: str, message: str, *, status: int = 400):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class WebhookEvent:
    """A parsed, authenticated event from a gateway.

    ``type`` is one of ``PAYMENT_SUCCEEDED``/``PAYMENT_FAILED``; ``order_id`` is the console's order id
    that the checkout was created for; ``amount_fen`` and ``currency`` are what the payer paid.
    """

    PAYMENT_SUCCEEDED = "payment.succeeded"
    PAYMENT_FAILED = "payment.failed"
    # Authentic but changes nothing (Alipay's WAIT_BUYER_PAY, a Stripe session still unpaid): the
    # gateway is answered "received" so it stops retrying. Not accepted in the console's own format.
    PAYMENT_PENDING = "payment.pending"
    # A gateway's word on one of the order's refunds (WeChat Pay's REFUND.*): the order's pending
    # refunds are asked about at once rather than at the next sweep.
    REFUND_UPDATED = "refund.updated"
    TYPES = (PAYMENT_SUCCEEDED, PAYMENT_FAILED)

    id: str
    type: str
    order_id: int
    amount_fen: int
    currency: str
    reference: str = ""
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PaymentQuery:
    """What the gateway says about an order when asked (the sweep of unpaid orders asks).

    ``state`` is ``paid`` (then ``amount_fen``, ``currency`` and ``reference`` say what arrived),
    ``pending`` (the payer may still pay) or ``closed`` (nothing was or will be paid).
    """

    PAID = "paid"
    PENDING = "pending"
    CLOSED = "closed"

    state: str
    amount_fen: int = 0
    currency: str = "CNY"
    reference: str = ""


@dataclass(frozen=True)
class SettledLine:
    """One line of a gateway's bill (statement) for a day: money that moved for one of our orders.

    ``kind`` is ``payment`` or ``refund``; ``order_id`` is ``None`` for a line that names no order of
    this console (another system sharing the merchant account); ``amount_fen`` is positive.
    """

    PAYMENT = "payment"
    REFUND = "refund"

    kind: str
    order_id: int | None
    amount_fen: int
    reference: str


@dataclass(frozen=True)
class RefundAnswer:
    """What a gateway said to a refund: its id, and ``succeeded``, ``pending`` (settled later) or ``failed``."""

    SUCCEEDED = "succeeded"
    PENDING = "pending"
    FAILED = "failed"

    id: str
    state: str = SUCCEEDED


def fen_from_yuan_text(text: str) -> int:
    """``"50.00"`` (a gateway's decimal yuan string) → 5000 fen, exactly, or ``WebhookRejected``."""
    whole, sep, decimals = str(text).strip().partition(".")
    if not whole.isdigit() or (sep and (not decimals.isdigit() or len(decimals) > 2)):
        raise WebhookRejected("malformed", "The amount is not a decimal amount of yuan.")
    return int(whole) * 100 + int(decimals.ljust(2, "0") if sep else 0)


def yuan_text_from_fen(amount_fen: int) -> str:
    """5000 fen → ``"50.00"``, the form Alipay's ``total_amount`` and ``refund_amount`` take."""
    return f"{amount_fen // 100}.{amount_fen % 100:02d}"


_OUT_TRADE_NO = re.compile(r"^topup_([0-9]{1,18})$")


def out_trade_no(order) -> str:
    """The merchant order number a gateway knows the order by (6–32 safe characters for WeChat Pay)."""
    return f"topup_{order.pk}"


def order_id_from(text: str) -> int:
    """The order id in a merchant order number, or ``WebhookRejected`` (404) when it is not ours."""
    match = _OUT_TRADE_NO.match(text or "")
    if not match:
        raise WebhookRejected("unknown_order", "The notification names no order of this console.", status=404)
    return int(match.group(1))


def notify_url(name: str) -> str:
    """The absolute webhook URL a gateway posts notifications to (``BILLING_NOTIFY_BASE_URL`` + path)."""
    return settings.BILLING_NOTIFY_BASE_URL.rstrip("/") + reverse("billing_webhook", args=[name])


class PaymentGateway:
    """One payment provider. Subclasses set ``name`` (used in the webhook URL) and implement the calls.

    ``create_checkout``, ``verify_webhook`` and ``refund`` are required; ``query`` and ``close`` (the
    sweep of unpaid orders) and ``webhook_ack`` (what the gateway expects back) have defaults.

    Every call may be repeated: ``create_checkout`` for the same order returns a usable URL again,
    ``refund`` with the same ``key`` refunds once and returns the same id.
    """

    name = "base"
    label = "Payment gateway"
    # True for a gateway that takes no real money (the embedded one): production refuses it unless
    # CONSOLE_DEMO_MODE is set, and every page then says so (console.demo).
    simulated: bool = False

    def create_checkout(self, *, order: TopUpOrder, return_url: str) -> str:
        """Start paying ``order`` and return the URL to send the payer to.

        The gateway later sends a signed webhook for the outcome; ``return_url`` is where the payer's
        browser comes back (it proves nothing). May set ``order.gateway_reference`` (the caller saves it).
        """
        raise NotImplementedError

    def verify_webhook(self, *, body: bytes, headers: Mapping[str, str]) -> WebhookEvent:
        """Authenticate and parse one webhook request (the raw body and its headers).

        Returns the event, or raises ``WebhookRejected`` for an unsigned, badly signed, stale or
        malformed request. Must not touch the database: the caller records and applies the event.
        """
        raise NotImplementedError

    def refund(self, *, order: TopUpOrder, amount_fen: int, key: str) -> str:
        """Send ``amount_fen`` of ``order``'s payment back to the payer (all of it or a part).

        Returns the gateway's refund id (the refund is done), or a ``RefundAnswer`` whose state may be
        ``pending`` (``refund_state`` is asked later). Idempotent by ``key``: a repeat returns the first
        refund's id and moves no more money. Raises ``GatewayError`` when the gateway refuses.
        """
        raise NotImplementedError

    def refund_state(self, *, order: TopUpOrder, refund_id: str, key: str) -> str:
        """Where a pending refund stands now: a ``RefundAnswer`` state. Raises ``GatewayError`` when
        the gateway cannot say (the refund stays pending)."""
        return RefundAnswer.SUCCEEDED

    def query(self, *, order: TopUpOrder) -> PaymentQuery:
        """Ask the gateway whether ``order`` was paid. The default knows nothing: ``pending``.

        Raises ``GatewayError`` when the gateway cannot answer (the sweep then leaves the order alone:
        UNKNOWN is not CLOSED).
        """
        return PaymentQuery(state=PaymentQuery.PENDING)

    def close(self, *, order: TopUpOrder) -> None:
        """Close ``order``'s checkout at the gateway so it can no longer be paid. "Already closed" and
        "never opened" count as done; raises ``GatewayError`` when the gateway refuses."""

    def webhook_ack(self) -> tuple[int, str, bytes] | None:
        """The response an accepted notification gets, as ``(status, content type, body)``; ``None``
        keeps the console's JSON receipt. Alipay, for one, retries until it reads ``success``."""
        return None

    def settlements(self, *, day: date) -> list[SettledLine] | None:
        """Every payment and refund the gateway settled on ``day`` (its bill or statement API).

        ``None`` means the gateway has no statement to compare (the simulated one); the daily
        reconciliation skips it. Raises ``GatewayError`` when the bill cannot be had yet.
        """
        return None

    def is_configured(self) -> list[str]:
        """The names of settings this gateway needs and lacks (``check --deploy`` warns about each)."""
        return []


# --- The shared HMAC scheme -------------------------------------------------------------------------


def webhook_secret() -> bytes:
    """``BILLING_GATEWAY_WEBHOOK_SECRET``, or (unset, for the simulated gateway) one derived from SECRET_KEY."""
    if settings.BILLING_GATEWAY_WEBHOOK_SECRET:
        return settings.BILLING_GATEWAY_WEBHOOK_SECRET.encode()
    return salted_hmac("billing.gateways.webhook-secret", "simulated", algorithm="sha256").hexdigest().encode()


def signature_header(*, body: bytes, secret: bytes, timestamp: int | None = None) -> str:
    """The ``X-Console-Signature`` value for ``body`` at ``timestamp`` (now by default)."""
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def header_get(headers: Mapping[str, str], name: str) -> str | None:
    """``headers[name]`` whatever its case (a plain dict from a test may not fold case)."""
    # Django's request.headers is case-insensitive; a plain dict from a test or a simulator may not be.
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lowered), None)
    return value


def signature_verify(*, body: bytes, headers: Mapping[str, str], secret: bytes, now: float | None = None) -> None:
    """Raise ``WebhookRejected`` unless ``headers`` carry a fresh, valid signature of ``body``."""
    header = header_get(headers, SIGNATURE_HEADER)
    if not header:
        raise WebhookRejected("signature_missing", f"The {SIGNATURE_HEADER} header is missing.", status=401)
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            parts.setdefault(key, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        raise WebhookRejected(
            "signature_malformed", "The signature header has no valid timestamp.", status=400
        ) from None
    candidates = parts.get("v1", [])
    if not candidates:
        raise WebhookRejected("signature_malformed", "The signature header has no v1 signature.", status=400)
    tolerance = int(getattr(settings, "BILLING_GATEWAY_WEBHOOK_TOLERANCE_S", 300))
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise WebhookRejected("signature_stale", "The webhook's timestamp is outside the tolerance.", status=401)
    expected = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    # Compare every candidate (secret rotation sends two) in constant time.
    if not any(hmac.compare_digest(expected.encode(), candidate.encode()) for candidate in candidates):
        raise WebhookRejected("signature_invalid", "The webhook's signature does not match.", status=401)


def event_parse(body: bytes) -> WebhookEvent:
    """Parse the JSON body of the console's webhook format, or raise ``WebhookRejected``::

    {"id": "evt_…", "type": "payment.succeeded", "data": {"order": 12, "amount_fen": 5000,
     "currency": "CNY", "reference": "pay_…"}}
    """
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookRejected("malformed", "The webhook body is not valid JSON.") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
        raise WebhookRejected("malformed", "The webhook body is not an event object.")
    data = payload["data"]
    event_id, event_type = payload.get("id"), payload.get("type")
    order_id, amount, currency = data.get("order"), data.get("amount_fen"), data.get("currency", "CNY")
    if not isinstance(event_id, str) or not event_id or len(event_id) > 200:
        raise WebhookRejected("malformed", "The event has no valid id.")
    if event_type not in WebhookEvent.TYPES:
        raise WebhookRejected("unsupported_event", f"Events of type {event_type!r} are not handled.")
    for value in (order_id, amount):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise WebhookRejected("malformed", "The event's order and amount must be positive integers.")
    if not isinstance(currency, str):
        raise WebhookRejected("malformed", "The event's currency is not valid.")
    reference = data.get("reference", "")
    return WebhookEvent(
        id=event_id,
        type=event_type,
        order_id=order_id,
        amount_fen=amount,
        currency=currency,
        reference=str(reference)[:200],
        payload=payload,
    )
