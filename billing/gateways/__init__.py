"""Payment gateways, chosen like Django's e-mail backends: dotted paths in settings.

``BILLING_PAYMENT_GATEWAY`` is the default gateway (offered first); ``BILLING_EXTRA_PAYMENT_GATEWAYS``
lists more to offer beside it (Alipay, WeChat Pay and Stripe at once, say). Each gateway's ``name``
is its key: the webhook URL, ``TopUpOrder.gateway``. ``gateway_get(name)`` returns an enabled
gateway by name; tests switch gateways with ``override_settings`` (the cache is keyed by the dotted
path, so an override takes effect).
"""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from billing.gateways.base import GatewayError, PaymentGateway, PaymentQuery, WebhookEvent, WebhookRejected

DEFAULT_GATEWAY = "billing.gateways.simulated.SimulatedGateway"

__all__ = [
    "GatewayError",
    "PaymentGateway",
    "PaymentQuery",
    "WebhookEvent",
    "WebhookRejected",
    "gateway_get",
    "gateways_enabled",
]


@cache
def _load(path: str) -> PaymentGateway:
    cls = import_string(path)
    if not (isinstance(cls, type) and issubclass(cls, PaymentGateway)):
        raise TypeError(f"{path} is not a PaymentGateway")
    return cls()


def gateway_paths() -> list[str]:
    """The enabled gateways' dotted paths, the default first, each once."""
    paths = [getattr(settings, "BILLING_PAYMENT_GATEWAY", DEFAULT_GATEWAY)]
    paths += list(getattr(settings, "BILLING_EXTRA_PAYMENT_GATEWAYS", []) or [])
    return list(dict.fromkeys(path for path in paths if path))


def gateways_enabled() -> list[PaymentGateway]:
    """Every enabled gateway, the default first: what the top-up page offers."""
    return [_load(path) for path in gateway_paths()]


def gateway_get(name: str | None = None) -> PaymentGateway:
    """The enabled gateway called ``name`` (the default one when ``name`` is ``None``).

    Raises ``LookupError`` for a name no enabled gateway has: an order of a gateway since switched
    off, a webhook for a gateway not in use.
    """
    if name is None:
        return _load(gateway_paths()[0])
    for gateway in gateways_enabled():
        if gateway.name == name:
            return gateway
    raise LookupError(f"no enabled payment gateway is called {name!r}")
