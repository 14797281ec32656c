"""The embedded payment gateway: a checkout page of its own that approves or declines.

No money moves and nothing leaves the machine, yet the whole real path runs: the checkout page's
buttons build the webhook a real gateway would send (a JSON event, signed with the shared secret and
the current time: ``webhook_build``), and ``billing.payments.topup_checkout_simulate`` hands the raw
body and headers to the same service the webhook endpoint uses, so verification, replay protection
and idempotent crediting are exercised on every demo top-up.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping

from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from billing.gateways.base import (
    SIGNATURE_HEADER,
    PaymentGateway,
    WebhookEvent,
    event_parse,
    signature_header,
    signature_verify,
    webhook_secret,
)


class SimulatedGateway(PaymentGateway):
    """Development and demo gateway; also the one the tests drive end to end."""

    name = "simulated"
    label = _("Simulated gateway")
    simulated = True  # its checkout page credits whatever the payer approves

    def create_checkout(self, *, order, return_url: str) -> str:
        order.gateway_reference = order.gateway_reference or f"sim_co_{order.pk}"
        return reverse("billing_simulated_checkout", args=[order.pk])

    def verify_webhook(self, *, body: bytes, headers: Mapping[str, str]) -> WebhookEvent:
        signature_verify(body=body, headers=headers, secret=webhook_secret())
        return event_parse(body)

    def refund(self, *, order, amount_fen: int, key: str) -> str:
        # Deterministic in the key: asking twice answers the same refund, as a real gateway's
        # idempotency key does.
        return "sim_re_" + hashlib.sha256(key.encode()).hexdigest()[:24]

    # --- What the checkout page's buttons do ---------------------------------------------------------

    def webhook_build(self, *, order, approve: bool, event_id: str | None = None) -> tuple[bytes, dict[str, str]]:
        """The signed request the gateway sends when the payer approves or declines ``order``."""
        event = {
            "id": event_id or f"evt_sim_{uuid.uuid4().hex}",
            "type": WebhookEvent.PAYMENT_SUCCEEDED if approve else WebhookEvent.PAYMENT_FAILED,
            "data": {
                "order": order.pk,
                "amount_fen": order.amount_fen,
                "currency": order.currency,
                "reference": f"sim_pay_{order.pk}",
            },
        }
        body = json.dumps(event, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature_header(body=body, secret=webhook_secret()),
        }
        return body, headers
