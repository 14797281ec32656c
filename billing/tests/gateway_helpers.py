"""Shared helpers of the billing tests: signed webhook deliveries and paid orders."""

from __future__ import annotations

import json
import time

from django.conf import settings
from django.test import Client

from billing.gateways.base import SIGNATURE_HEADER, signature_header
from billing.gateways.simulated import SimulatedGateway
from billing.payments import topup_checkout_simulate, topup_order_create

WEBHOOK_URL = "/billing/webhooks/simulated/"


def event_body(order, *, approve: bool = True, event_id: str = "evt_1", amount_fen: int | None = None) -> bytes:
    event = {
        "id": event_id,
        "type": "payment.succeeded" if approve else "payment.failed",
        "data": {
            "order": order.pk,
            "amount_fen": order.amount_fen if amount_fen is None else amount_fen,
            "currency": "CNY",
            "reference": f"pay_{order.pk}",
        },
    }
    return json.dumps(event).encode()


def deliver(body: bytes, *, secret: str | None = None, timestamp: int | None = None, header: str | None = None):
    """POST ``body`` to the webhook endpoint as a gateway would, signed unless ``header`` overrides it."""
    if header is None:
        secret = settings.BILLING_GATEWAY_WEBHOOK_SECRET if secret is None else secret
        header = signature_header(body=body, secret=secret.encode(), timestamp=timestamp or int(time.time()))
    headers = {SIGNATURE_HEADER: header} if header else {}
    return Client().post(WEBHOOK_URL, data=body, content_type="application/json", headers=headers)


def pending_order(user, amount_fen: int = 5000):
    order, _ = topup_order_create(user=user, amount_fen=amount_fen)
    return order


def paid_order(user, amount_fen: int = 5000):
    order = pending_order(user, amount_fen)
    outcome = topup_checkout_simulate(gateway=SimulatedGateway(), order=order, approve=True)
    assert outcome.result == "credited"
    order.refresh_from_db()
    return order
