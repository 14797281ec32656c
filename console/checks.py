"""System checks of the console's own. Registered in ``ConsoleConfig.ready``."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from console.demo import demo_parts_enabled

DEMO_HINT = "or set CONSOLE_DEMO_MODE=1 if this console is a demo: every page then says which parts are simulated."


@register(Tags.security, deploy=True)
def demo_parts_check(app_configs=None, **kwargs) -> list[CheckMessage]:
    """``check --deploy`` fails while a simulated part is enabled, unless the console is a demo.

    Errors, not warnings: a console that runs them takes real sign-ups for machines that do not exist
    and credits wallets with money that was never taken.
    """
    if settings.CONSOLE_DEMO_MODE:
        return []
    parts = demo_parts_enabled()
    errors: list[CheckMessage] = []
    for alias in parts.cloud:
        backend = settings.PROVISIONING_BACKENDS[alias]["BACKEND"]
        errors.append(
            Error(
                f"The simulated cloud is enabled ({backend}): its instances are not real machines.",
                hint=f"Remove it (CONSOLE_PROVISIONING_BACKENDS='{{\"{alias}\": null}}') and configure a real "
                f"provider, {DEMO_HINT}",
                obj=f"PROVISIONING_BACKENDS[{alias!r}]",
                id="console.E001",
            )
        )
    if parts.payments:
        errors.append(
            Error(
                f"The simulated payment gateway is enabled ({parts.payments}): its checkout page credits "
                "whatever is approved and takes no money.",
                hint=f"Set BILLING_PAYMENT_GATEWAY to a real gateway (and BILLING_GATEWAY_WEBHOOK_SECRET), {DEMO_HINT}",
                obj="BILLING_PAYMENT_GATEWAY",
                id="console.E002",
            )
        )
    return errors
