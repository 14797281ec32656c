"""Stripe Checkout: cards (and wallets) for international payers, through the official ``stripe`` library.

The payer is redirected to a Checkout Session Stripe hosts; Stripe's webhook says how it ended. The
webhook is verified by the library's own ``Webhook.construct_event`` (``Stripe-Signature``:
HMAC-SHA256 over ``"<t>.<body>"`` with the endpoint's ``whsec_`` secret, and a timestamp tolerance).

Events handled: ``checkout.session.completed`` (paid now, or unpaid for a delayed method),
``checkout.session.async_payment_succeeded`` / ``…_failed`` and ``checkout.session.expired``.
The order is the session's ``client_reference_id``; amounts are in the currency's minor unit (fen
for CNY), as the ledger keeps them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from functools import cached_property

import stripe
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from billing.gateways.base import (
    GatewayError,
    PaymentGateway,
    PaymentQuery,
    RefundAnswer,
    SettledLine,
    WebhookEvent,
    WebhookRejected,
    header_get,
)

logger = logging.getLogger(__name__)

SUCCEEDED = {"checkout.session.async_payment_succeeded"}
FAILED = {"checkout.session.async_payment_failed", "checkout.session.expired"}
# Stripe keeps a Checkout Session open at most 24 hours and at least 30 minutes.
SESSION_MAX_S, SESSION_MIN_S = 24 * 3600, 30 * 60


class StripeGateway(PaymentGateway):
    """Stripe Checkout in payment mode, one line item: the top-up."""

    name = "stripe"
    label = _("Card (Stripe)")

    @cached_property
    def client(self) -> stripe.StripeClient:
        # requests as the transport: one HTTP stack for every gateway, and one seam for the tests.
        return stripe.StripeClient(
            settings.STRIPE_SECRET_KEY, http_client=stripe.RequestsClient(), max_network_retries=2
        )

    def is_configured(self) -> list[str]:
        return [name for name in ("STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET") if not getattr(settings, name, "")]

    def _call(self, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except (stripe.APIConnectionError, stripe.RateLimitError) as exc:
            raise GatewayError(f"Stripe is not reachable: {exc.user_message or exc}", transient=True) from exc
        except stripe.StripeError as exc:
            raise GatewayError(
                f"Stripe refused: {exc.user_message or exc}", transient=bool(exc.http_status and exc.http_status >= 500)
            ) from exc

    def create_checkout(self, *, order, return_url: str) -> str:
        lifetime = min(max(int(settings.BILLING_TOPUP_ORDER_TTL_S), SESSION_MIN_S), SESSION_MAX_S)
        session = self._call(
            self.client.v1.checkout.sessions.create,
            params={
                "mode": "payment",
                "client_reference_id": str(order.pk),
                "metadata": {"order": str(order.pk)},
                "payment_intent_data": {"metadata": {"order": str(order.pk)}},
                "line_items": [
                    {
                        "quantity": 1,
                        "price_data": {
                            "currency": order.currency.lower(),
                            "unit_amount": order.amount_fen,
                            "product_data": {"name": f"{settings.CONSOLE_SITE_NAME} top-up #{order.pk}"},
                        },
                    }
                ],
                "success_url": return_url,
                "cancel_url": return_url,
                "expires_at": int(time.time()) + lifetime,
            },
            # The same order asks for the same session: a retried create finds the first one.
            options={"idempotency_key": f"checkout:order:{order.pk}"},
        )
        order.gateway_reference = session.id
        return session.url

    def verify_webhook(self, *, body: bytes, headers: Mapping[str, str]) -> WebhookEvent:
        signature = header_get(headers, "Stripe-Signature")
        if not signature:
            raise WebhookRejected("signature_missing", "The Stripe-Signature header is missing.", status=401)
        try:
            event = stripe.Webhook.construct_event(
                body,
                signature,
                settings.STRIPE_WEBHOOK_SECRET,
                tolerance=int(settings.BILLING_GATEWAY_WEBHOOK_TOLERANCE_S),
            )
        except stripe.SignatureVerificationError:
            raise WebhookRejected("signature_invalid", "The webhook's signature does not verify.", status=401) from None
        except ValueError:
            raise WebhookRejected("malformed", "The webhook body is not a Stripe event.") from None
        if event.type != "checkout.session.completed" and event.type not in SUCCEEDED | FAILED:
            # Stripe retries anything but 2xx for days: an event we do not use is acknowledged.
            raise WebhookRejected("unsupported_event", f"Events of type {event.type} are not used.", status=200)
        # StripeObjects are not dicts (stripe ≥ 13): read plain data.
        session = event.data.object.to_dict()
        try:
            order_id = int(session.get("client_reference_id") or "")
        except ValueError:
            raise WebhookRejected("unknown_order", "The session names no order of this console.", status=404) from None
        if event.type == "checkout.session.completed":
            kind = (
                WebhookEvent.PAYMENT_SUCCEEDED
                if session.get("payment_status") == "paid"
                else WebhookEvent.PAYMENT_PENDING
            )
        else:
            kind = WebhookEvent.PAYMENT_SUCCEEDED if event.type in SUCCEEDED else WebhookEvent.PAYMENT_FAILED
        amount = session.get("amount_total")
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise WebhookRejected("malformed", "The session has no valid amount.")
        return WebhookEvent(
            id=event.id,
            type=kind,
            order_id=order_id,
            amount_fen=amount,
            currency=str(session.get("currency") or "").upper(),
            # The payment intent: what a refund names later.
            reference=str(session.get("payment_intent") or session.get("id") or "")[:200],
            payload={"id": event.id, "type": event.type},
        )

    def query(self, *, order) -> PaymentQuery:
        if not order.gateway_reference.startswith("cs_"):
            return PaymentQuery(state=PaymentQuery.CLOSED)  # no session was ever opened
        session = self._call(self.client.v1.checkout.sessions.retrieve, order.gateway_reference).to_dict()
        if session.get("payment_status") == "paid":
            return PaymentQuery(
                state=PaymentQuery.PAID,
                amount_fen=int(session.get("amount_total") or 0),
                currency=str(session.get("currency") or "").upper(),
                reference=str(session.get("payment_intent") or session["id"]),
            )
        return PaymentQuery(state=PaymentQuery.CLOSED if session.get("status") == "expired" else PaymentQuery.PENDING)

    def close(self, *, order) -> None:
        if not order.gateway_reference.startswith("cs_"):
            return
        try:
            self.client.v1.checkout.sessions.expire(order.gateway_reference)
        except stripe.InvalidRequestError:
            return  # already expired or completed: a completed one's webhook still credits
        except stripe.StripeError as exc:
            raise GatewayError(f"Stripe did not expire the session: {exc}", transient=True) from exc

    def settlements(self, *, day: date) -> list[SettledLine]:
        """The day's balance transactions (charges and refunds) with their sources, from Stripe's API.

        The day is the console's local day (``TIME_ZONE``), as the ledger's; the order is the
        ``order`` metadata the checkout put on the payment (copied to its charge) and on each refund.
        """
        start = timezone.make_aware(datetime.combine(day, datetime.min.time()))
        listing = self._call(
            self.client.v1.balance_transactions.list,
            params={
                "created": {"gte": int(start.timestamp()), "lt": int((start + timedelta(days=1)).timestamp())},
                "limit": 100,
                "expand": ["data.source"],
            },
        )
        try:
            return stripe_balance_parse(item.to_dict() for item in listing.auto_paging_iter())
        except stripe.StripeError as exc:
            raise GatewayError(f"Stripe's balance could not be listed: {exc}", transient=True) from exc

    def refund(self, *, order, amount_fen: int, key: str) -> str:
        if not order.gateway_reference.startswith("pi_"):
            raise GatewayError("This order has no Stripe payment to refund.")
        answer = self._call(
            self.client.v1.refunds.create,
            params={
                "payment_intent": order.gateway_reference,
                "amount": amount_fen,
                "metadata": {"order": str(order.pk)},
            },
            options={"idempotency_key": f"refund:{key}"},
        )
        refund = answer.to_dict()
        if refund.get("status") in ("failed", "canceled"):
            raise GatewayError(f"Stripe refused the refund: {refund.get('failure_reason') or refund.get('status')}")
        return RefundAnswer(id=str(refund["id"]), state=_refund_state(refund.get("status", "")))

    def refund_state(self, *, order, refund_id: str, key: str) -> str:
        return _refund_state(self._call(self.client.v1.refunds.retrieve, refund_id).to_dict().get("status", ""))


def _refund_state(status: str) -> str:
    # succeeded; pending / requires_action (settled later); failed / canceled (the money stayed with us).
    if status == "succeeded":
        return RefundAnswer.SUCCEEDED
    return RefundAnswer.FAILED if status in ("failed", "canceled") else RefundAnswer.PENDING


def stripe_balance_parse(items) -> list[SettledLine]:
    """Balance transactions (dicts, ``source`` expanded) → settled lines; fees, payouts and the rest are skipped."""
    lines = []
    for item in items:
        source = item.get("source") or {}
        if item.get("type") in ("charge", "payment"):
            kind, reference = SettledLine.PAYMENT, source.get("payment_intent") or source.get("id", "")
        elif item.get("type") in ("refund", "payment_refund"):
            kind, reference = SettledLine.REFUND, source.get("id", "")
        else:
            continue
        order = (source.get("metadata") or {}).get("order", "")
        lines.append(
            SettledLine(
                kind=kind,
                order_id=int(order) if str(order).isdigit() else None,
                amount_fen=abs(int(source.get("amount", item.get("amount", 0)))),
                reference=str(reference),
            )
        )
    return lines
