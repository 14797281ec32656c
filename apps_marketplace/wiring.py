"""``instances.hooks.transition``: a deployment's owner hears when its app is ready or failed.

A deployment has no state machine of its own (its instance's status is its status), so the moment it
becomes ready is its instance's move to RUNNING, and it failed when the instance moved to FAILED. Only
those two moves of an instance launched with an app (``app_launch``: every deployment's instance, set
at its launch) look for a deployment (one query); every other transition costs nothing.
"""

from __future__ import annotations

from django.utils.translation import gettext as _

from apps_marketplace.models import Deployment
from instances import hooks as instance_hooks
from instances.models import Instance
from notifications.models import Kind
from notifications.services import Message, notify

S = Instance.Status


def deployment_transition_notify(*, instance: Instance, src: str, dst: str) -> None:
    if src == dst or dst not in (S.RUNNING, S.FAILED) or not instance.app_launch:
        return
    deployment = Deployment.objects.select_related("app", "created_by").filter(instance_id=instance.pk).first()
    if deployment is None:
        return
    values = {"app": deployment.app.name, "name": instance.name}
    if dst == S.RUNNING:
        kind = Kind.DEPLOYMENT_READY

        def render() -> Message:
            return Message(
                title=_("Your %(app)s deployment %(name)s is ready") % values,
                body=_("%(app)s on %(name)s is running. Open it from its deployment page.") % values,
            )
    else:
        kind = Kind.DEPLOYMENT_FAILED

        def render() -> Message:
            return Message(
                title=_("Your %(app)s deployment %(name)s failed") % values,
                body=_("%(app)s on %(name)s could not start. Its deployment page says why; redeploy or delete it.")
                % values,
            )

    notify(
        user=instance.owner,
        kind=kind,
        render=render,
        link=f"/apps/deployments/{deployment.pk}/",
        data={"deployment_id": str(deployment.pk), "instance_id": str(instance.pk), "app": deployment.app.slug},
        actor=deployment.created_by,
    )


def wire() -> None:
    """Register the marketplace's answers to the hooks of the apps below it."""
    instance_hooks.transition.implement(deployment_transition_notify)
