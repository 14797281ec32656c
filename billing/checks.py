"""``check --deploy``: an enabled payment gateway that lacks its keys takes no money, and says so only
when a payer tries. Registered in ``BillingConfig.ready``."""

from __future__ import annotations

from django.core.checks import CheckMessage, Tags, Warning, register

from billing.gateways import gateways_enabled


@register(Tags.security, deploy=True)
def gateway_keys_check(app_configs=None, **kwargs) -> list[CheckMessage]:
    """A warning per enabled gateway that misses a setting it needs (names only, never values)."""
    warnings: list[CheckMessage] = []
    for gateway in gateways_enabled():
        missing = gateway.is_configured()
        if missing:
            warnings.append(
                Warning(
                    f"The payment gateway {gateway.name!r} is enabled but lacks: {', '.join(missing)}.",
                    hint="Set them in the environment (README, configuration), or remove the gateway from "
                    "BILLING_PAYMENT_GATEWAY / BILLING_EXTRA_PAYMENT_GATEWAYS.",
                    obj=gateway.name,
                    id="billing.W001",
                )
            )
    return warnings
