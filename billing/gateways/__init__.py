"""Payment gateways, chosen like Django's e-mail backends: a dotted path in ``BILLING_PAYMENT_GATEWAY``.

``gateway_get()`` imports the configured class once and returns an instance; tests switch gateways
with ``override_settings`` (the cache is keyed by the dotted path, so an override takes effect).
"""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from billing.gateways.base import GatewayError, PaymentGateway, WebhookEvent, WebhookRejected

DEFAULT_GATEWAY = "billing.gateways.simulated.SimulatedGateway"

__all__ = ["GatewayError", "PaymentGateway", "WebhookEvent", "WebhookRejected", "gateway_get"]


@cache
def _load(path: str) -> PaymentGateway:
    cls = import_string(path)
    if not (isinstance(cls, type) and issubclass(cls, PaymentGateway)):
        raise TypeError(f"{path} is not a PaymentGateway")
    return cls()


def gateway_get() -> PaymentGateway:
    """The configured payment gateway (``BILLING_PAYMENT_GATEWAY``, the simulated one by default)."""
    return _load(getattr(settings, "BILLING_PAYMENT_GATEWAY", DEFAULT_GATEWAY))
