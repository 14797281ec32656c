"""What each role may do, as one table.

Pages, the API and (later) the resource apps ask ``membership_can(membership, perm)``; nobody
compares role names. A permission is a plain string constant so a higher app can name one without
importing anything but this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from teams.models import Role

if TYPE_CHECKING:
    from teams.models import Membership


class Permission:
    """The permission names. Each is granted to the roles listed in ``ROLE_PERMISSIONS``."""

    TEAM_VIEW = "team.view"  # see the team's page and its members
    TEAM_MANAGE = "team.manage"  # rename the team
    TEAM_MANAGE_MEMBERS = "team.manage_members"  # invite, revoke, remove, change roles and limits
    TEAM_DELETE = "team.delete"
    AUDIT_VIEW = "audit.view"
    MONEY_MOVE = "money.move"  # move money from one's personal balance into the team's
    MONEY_MOVE_OUT = "money.move_out"  # move the team's money out of it
    RESOURCES_LAUNCH = "resources.launch"  # launch instances, create volumes, deploy apps
    RESOURCES_OPERATE_ANY = "resources.operate_any"  # stop, start, release anyone's team resources
    RESOURCES_VIEW = "resources.view"  # see the team's resources
    BILLING_VIEW = "billing.view"  # statements and spend
    QUOTA_REQUEST = "quota.request"
    BUDGETS_MANAGE = "budgets.manage"  # the team's budget and each member's limits


P = Permission

_ADMIN = frozenset(
    {
        P.TEAM_VIEW,
        P.TEAM_MANAGE,
        P.TEAM_MANAGE_MEMBERS,
        P.AUDIT_VIEW,
        P.MONEY_MOVE,
        P.RESOURCES_LAUNCH,
        P.RESOURCES_OPERATE_ANY,
        P.RESOURCES_VIEW,
        P.BILLING_VIEW,
        P.QUOTA_REQUEST,
        P.BUDGETS_MANAGE,
    }
)

ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    # The issue: owner = everything, including deleting the team and moving money (out of it).
    Role.OWNER: _ADMIN | {P.TEAM_DELETE, P.MONEY_MOVE_OUT},
    # Members, budgets, quota requests, every resource; may also pay into the team from their own wallet.
    Role.ADMIN: _ADMIN,
    # Launches and operates their own resources (an "own" check the resource apps make); sees the team's.
    Role.MEMBER: frozenset({P.TEAM_VIEW, P.RESOURCES_LAUNCH, P.RESOURCES_VIEW}),
    # Statements and spend only.
    Role.BILLING: frozenset({P.TEAM_VIEW, P.BILLING_VIEW}),
}

ALL_PERMISSIONS = frozenset(value for name, value in vars(Permission).items() if name.isupper())


def role_can(role: str, perm: str) -> bool:
    if perm not in ALL_PERMISSIONS:
        raise ValueError(f"Unknown team permission {perm!r}")
    return perm in ROLE_PERMISSIONS.get(role, frozenset())


def membership_can(membership: Membership | None, perm: str) -> bool:
    """Whether this membership grants ``perm``. ``None`` (no membership: the personal context, or not a
    member) grants nothing."""
    if membership is None:
        return role_can("", perm)
    return role_can(membership.role, perm)
