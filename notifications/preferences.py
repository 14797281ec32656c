"""Where each kind of notification goes unless the user chose otherwise: one table.

The inbox is always on (see ``NotificationPreference``). E-mail is on for what costs money or
machines if missed (a stop, a balance running out, a budget reached, a decision the user waits for),
and for the idle-stop warning, since whoever gets it is by definition not looking at the console.
What the user has just been told or watches happen on the page (the idle stop itself after its
warning, a deployment becoming ready) is inbox only.
Webhooks are on for every kind: an endpoint is something the user set up on purpose to hear them.
"""

from __future__ import annotations

from dataclasses import dataclass

from notifications.models import Kind


@dataclass(frozen=True)
class Channels:
    email: bool
    webhook: bool = True
    inbox: bool = True  # always: never stored, never turned off


DEFAULTS: dict[str, Channels] = {
    Kind.PREEMPTED: Channels(email=True),
    Kind.RECOVERED: Channels(email=True),
    Kind.START_QUEUE: Channels(email=True),
    Kind.INCIDENT_CREDIT: Channels(email=True),
    Kind.IDLE_WARNING: Channels(email=True),
    Kind.IDLE_STOPPED: Channels(email=False),
    Kind.LOW_BALANCE: Channels(email=True),
    Kind.OUT_OF_FUNDS: Channels(email=True),
    Kind.BUDGET_THRESHOLD: Channels(email=True),
    Kind.BUDGET_REACHED: Channels(email=True),
    Kind.INSTANCE_LIMIT_REACHED: Channels(email=True),
    Kind.QUOTA_DECIDED: Channels(email=True),
    Kind.RESERVATION: Channels(email=True),
    Kind.INVOICE_DECIDED: Channels(email=True),
    Kind.DEPLOYMENT_READY: Channels(email=False),
    Kind.DEPLOYMENT_FAILED: Channels(email=True),
}
