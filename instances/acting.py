"""The acting context as the instances pages and API read it: whose instances, and what this person may
do with each (``teams.context``, ``teams.access``).

One reading for both: a page's ``HttpRequest`` and the API's DRF ``Request`` (whose ``user`` may come
from a token, after the middleware ran on the session). The membership counts only when it is the
authenticated person's, so a token's request is never acted out in the browser session's team.
"""

from __future__ import annotations

from django.utils.translation import gettext as _

from instances.errors import NotPermitted
from instances.models import Instance
from teams.access import Access, membership_access
from teams.roles import Permission, membership_can


def acting(request) -> tuple[object, object]:
    """``(principal, membership)``: the team's account and the person's membership in a team's
    context; ``(request.user, None)`` in the personal one."""
    membership = getattr(request, "membership", None)
    if membership is not None and membership.user_id == request.user.pk:
        return membership.team.account, membership
    return request.user, None


def acting_can(request, perm: str) -> bool:
    """Whether the person may ``perm`` in the acting context (always, in the personal one)."""
    _principal, membership = acting(request)
    return membership is None or membership_can(membership, perm)


def instance_access(request, instance: Instance) -> Access:
    """The person's access to ``instance`` of the acting principal (looked up by it, so never NONE for a
    stranger's: that was a 404 already), with no query."""
    principal, membership = acting(request)
    if instance.owner_id != principal.pk:
        return Access.NONE
    if membership is None:
        return Access.OPERATE
    return membership_access(membership=membership, user_id=request.user.pk, created_by_id=instance.created_by_id)


def instances_mark(request, instances):
    """Mark each instance ``view_only`` when the person may see but not operate it (the pages hide its
    buttons). Returns them."""
    for instance in instances:
        instance.view_only = instance_access(request, instance) != Access.OPERATE
    return instances


def require_view(request) -> None:
    """Refuse a member whose role does not show the team's instances (a billing viewer)."""
    if not acting_can(request, Permission.RESOURCES_VIEW):
        raise NotPermitted(_("Your role in this team does not show its instances."))


def require_launch(request) -> None:
    if not acting_can(request, Permission.RESOURCES_LAUNCH):
        raise NotPermitted(_("Your role in this team does not allow launching instances."))


def require_operate(request, instance: Instance) -> None:
    """Refuse acting on an instance the person may only see (another member's)."""
    if instance_access(request, instance) != Access.OPERATE:
        raise NotPermitted(
            _(
                "This instance was launched by another member of the team: only they and the team's admins may act on it."
            )
        )


def require_quota_request(request) -> None:
    if not acting_can(request, Permission.QUOTA_REQUEST):
        raise NotPermitted(_("Only the team's admins and owners may see and request its GPU quota."))
