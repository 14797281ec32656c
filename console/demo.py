"""The console's demo parts: the simulated cloud and the simulated payment gateway.

They let a console run with no provider and no merchant account, which is what development, the
tests and a demo want, and what a production console must never do by accident: its users would
launch machines that do not exist and top up with money nobody takes. A provisioning backend or a
payment gateway says it is one with the class attribute ``simulated = True``.

``console.checks`` fails ``manage.py check --deploy`` while one is enabled, unless
``CONSOLE_DEMO_MODE`` says the console is a demo; and whenever one is enabled, every page carries a
banner naming it (``templates/console/_demo_banner.html``, through the ``console`` context processor).

A check someone must remember to run is not enough: with ``CONSOLE_ENV=production`` the console
refuses to start at all (``production_demo_parts_refuse``, from ``ConsoleConfig.ready``, so web,
workers and ``manage.py`` alike) while a demo part is enabled and ``CONSOLE_DEMO_MODE`` is off. E-mail
that is never sent (the development mailbox, the console backend that prints messages, log-in and
password-reset links included, into the log) counts as a demo part there too.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from billing.gateways import gateway_paths
from providers import backend_class  # the backends' loader: it knows their old paths too


@dataclass(frozen=True)
class DemoParts:
    """What of this console is simulated. False when nothing is."""

    cloud: tuple[str, ...] = ()  # the PROVISIONING_BACKENDS aliases whose backend is simulated
    payments: str = ""  # the simulated gateway's dotted path when it is enabled (default or extra)

    def __bool__(self) -> bool:
        return bool(self.cloud or self.payments)


def _is_simulated(path: str, *, load=import_string) -> bool:
    # Only the class is imported, nothing is instantiated. A path that does not import is not a demo
    # part: the backend loader and the gateway loader report it where it is used.
    try:
        return bool(getattr(load(path), "simulated", False))
    except ImportError:
        return False


def demo_parts_enabled() -> DemoParts:
    """The simulated parts the settings enable: a configured backend alias counts, used by a region or not."""
    cloud = tuple(
        alias
        for alias, config in settings.PROVISIONING_BACKENDS.items()
        if config and _is_simulated(config.get("BACKEND", ""), load=backend_class)
    )
    simulated = [path for path in gateway_paths() if _is_simulated(path)]
    return DemoParts(cloud=cloud, payments=simulated[0] if simulated else "")


# E-mail backends that deliver nothing: fine for development and demos, never for real users.
DEMO_MAIL_BACKENDS = frozenset(
    {
        "console.mail.DevMailboxBackend",
        "django.core.mail.backends.console.EmailBackend",
        "django.core.mail.backends.filebased.EmailBackend",
        "django.core.mail.backends.locmem.EmailBackend",
        "django.core.mail.backends.dummy.EmailBackend",
    }
)


def demo_mail_backend() -> str:
    """``EMAIL_BACKEND`` when it delivers nothing, else ""."""
    return settings.EMAIL_BACKEND if settings.EMAIL_BACKEND in DEMO_MAIL_BACKENDS else ""


def production_demo_parts_refuse() -> None:
    """Raise ``ImproperlyConfigured`` naming each demo part, when ``CONSOLE_ENV=production`` runs one
    and ``CONSOLE_DEMO_MODE`` does not say this console is a demo. Elsewhere, nothing."""
    if not settings.PRODUCTION or settings.CONSOLE_DEMO_MODE:
        return
    parts = demo_parts_enabled()
    found = [
        f"the simulated cloud (PROVISIONING_BACKENDS[{alias!r}]: remove it with "
        f"CONSOLE_PROVISIONING_BACKENDS='{{\"{alias}\": null, ...}}' and configure a real provider)"
        for alias in parts.cloud
    ]
    if parts.payments:
        found.append(
            f"the simulated payment gateway ({parts.payments}: set BILLING_PAYMENT_GATEWAY to a real one, "
            "with BILLING_GATEWAY_WEBHOOK_SECRET)"
        )
    if mail := demo_mail_backend():
        found.append(f"e-mail that is never sent ({mail}: set EMAIL_HOST, or EMAIL_BACKEND to a real backend)")
    if found:
        raise ImproperlyConfigured(
            "CONSOLE_ENV=production refuses to run demo parts, and this console enables "
            + "; ".join(found)
            + ". Configure real ones, or set CONSOLE_DEMO_MODE=1 if this console is a demo "
            "(every page then says which parts are simulated)."
        )
