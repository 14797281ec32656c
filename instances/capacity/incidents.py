"""A service credit per incident: an instance interrupted because its node failed.

When a running instance's node fails under it and the console carries it on (``services.sync._instance_recover``:
restarted on healthy nodes, or queued as preempted until there is room), its owner is credited
``INSTANCES_INCIDENT_CREDIT_FEN`` (0, the default: off). In the transaction of that move: the credit
through the ledger (``billing.services.credit_grant``), a line on the instance's timeline and a note in
the owner's inbox (and e-mail, webhooks, as their preferences say) commit together with the move, or
not at all.

Once per incident: the incident is the run that was interrupted, named by the instance and the moment
it started running (``running_since``). The ledger's key makes a repeat post nothing, and the timeline
and the inbox are written only when the credit was posted now.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from billing.services import credit_grant
from core.formatting import cny
from core.messages import reason as stored
from instances.lifecycle import instance_events_write
from instances.models import Instance, InstanceEvent
from notifications.models import Kind
from notifications.services import Message, notify


def incident_key(*, instance: Instance) -> str:
    """The interrupted run: the instance and when it last started running (one failure ends a run)."""
    started = instance.running_since.isoformat() if instance.running_since else "never"
    return f"instance:{instance.pk}:incident:{started}"


def incident_credit(*, instance: Instance, status: str, failed: str) -> bool:
    """Credit ``instance``'s owner for the interruption by node(s) ``failed``, now in ``status``; True
    when credited now. Call inside the transaction that moved it. Nothing when the setting is 0."""
    amount = int(getattr(settings, "INSTANCES_INCIDENT_CREDIT_FEN", 0) or 0)
    if amount <= 0:
        return False
    credited = credit_grant(
        user=instance.owner,
        amount_fen=amount,
        key=incident_key(instance=instance),
        description=f"Credit: {instance.name} interrupted by node failure ({failed})",
        metadata={"instance": str(instance.pk), "incident": "node_failure", "nodes": failed},
    )
    if not credited:
        return False
    why = stored(
        gettext_noop("Credited %(amount)s for the interruption: node %(node)s failed"), amount=cny(amount), node=failed
    )
    instance_events_write(moves=[(instance.pk, status, status, why)], at=timezone.now(), kind=InstanceEvent.Kind.NODE)

    def render() -> Message:
        return Message(
            title=_("%(amount)s credited for the interruption of %(name)s")
            % {"amount": cny(amount), "name": instance.name},
            body=_(
                "A node under your instance %(name)s failed (%(node)s). It carries on with its disk, and "
                "%(amount)s was added to your balance for the interruption."
            )
            % {"name": instance.name, "node": failed, "amount": cny(amount)},
        )

    notify(
        user=instance.owner,
        kind=Kind.INCIDENT_CREDIT,
        render=render,
        link=f"/instances/{instance.pk}/",
        data={"instance_id": str(instance.pk), "instance_name": instance.name, "amount_fen": amount, "nodes": failed},
    )
    return True
