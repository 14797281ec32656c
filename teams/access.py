"""Who may see and who may operate a resource (an instance, a volume, a deployment, a port), as one rule.

A resource is owned by an account: a person's own, or a team's (``Team.account``). On a personal
account only its owner has any access. On a team's: admins and owners operate everything; a member
operates what they created (while they still may launch) and sees the rest; a billing viewer, a
former member and a stranger get nothing, which the pages and the API answer with a 404.

The resource apps sit above teams and ask here; none of them compares role names. Checked on every
request and connection, so a membership that ends takes access with it at once.
"""

from __future__ import annotations

from enum import IntEnum

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _

from teams.models import Membership
from teams.roles import Permission, membership_can


class Access(IntEnum):
    NONE = 0  # not found, as far as this person can tell
    VIEW = 1  # listed and shown, without actions
    OPERATE = 2  # stop, start, release, open its servers, SSH into it


def membership_access(*, membership: Membership | None, user_id, created_by_id) -> Access:
    """Access through a membership already read (the acting context's ``request.membership``)."""
    if membership is None:
        return Access.NONE
    if membership_can(membership, Permission.RESOURCES_OPERATE_ANY):
        return Access.OPERATE
    if (
        created_by_id is not None
        and created_by_id == user_id
        and membership_can(membership, Permission.RESOURCES_LAUNCH)
    ):
        return Access.OPERATE
    if membership_can(membership, Permission.RESOURCES_VIEW):
        return Access.VIEW
    return Access.NONE


def resource_access(*, user, owner_id, created_by_id=None) -> Access:
    """``user``'s access to a resource of account ``owner_id`` created by ``created_by_id``.

    No query for a personal resource (or none at all); one for a team's. For paths outside the acting
    context: the proxy, the SSH gateway, the files API.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return Access.NONE
    if owner_id == user.pk:
        return Access.OPERATE
    membership = (
        Membership.objects.filter(team__account_id=owner_id, user_id=user.pk).only("id", "role", "team_id").first()
    )
    return membership_access(membership=membership, user_id=user.pk, created_by_id=created_by_id)


def request_acting(request) -> tuple[object, Membership | None]:
    """``(principal, membership)`` of a page's or an API view's request.

    The middleware's pair, except where it saw nobody: an API token is authenticated by the view, after
    the middleware, so a token's request acts for its own user (personal) until tokens are scoped to a team.
    """
    principal = getattr(request, "principal", None)
    if principal is None or not getattr(principal, "is_authenticated", False):
        return request.user, None
    return principal, getattr(request, "membership", None)


def request_can(request, perm: str) -> bool:
    """Whether the acting context allows ``perm``: always in the personal context, by role in a team's."""
    principal, membership = request_acting(request)
    if membership is None:
        return principal == request.user
    return membership_can(membership, perm)


def principal_access(request, *, owner_id, created_by_id=None) -> Access:
    """Access in the request's acting context: the principal's own resources, through the membership
    the middleware read (no query). A resource of another account is NONE here, even one the person
    could reach in another context: pages and the API show one context at a time."""
    principal, membership = request_acting(request)
    if owner_id != getattr(principal, "pk", None):
        return Access.NONE
    if membership is None:
        return Access.OPERATE if owner_id == request.user.pk else Access.NONE
    return membership_access(membership=membership, user_id=request.user.pk, created_by_id=created_by_id)


def require_access(request, *, owner_id, created_by_id=None, operate: bool = False, message: str = "") -> Access:
    """``principal_access``, enforced: NONE is a 404 (as a stranger's object); VIEW where ``operate`` is
    asked is a 403 with ``message`` (JSON in the API). Returns the access, for the page's buttons."""
    access = principal_access(request, owner_id=owner_id, created_by_id=created_by_id)
    if access == Access.NONE:
        raise Http404
    if operate and access < Access.OPERATE:
        raise PermissionDenied(message or _("Only its creator or a team admin can change this."))
    return access


def require_permission(request, perm: str, message: str = "") -> None:
    """A 403 with ``message`` unless the acting context allows ``perm`` (e.g. launching in a team)."""
    if not request_can(request, perm):
        raise PermissionDenied(message or _("Your role in this team does not allow this."))
