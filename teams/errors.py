"""The refusals team services raise. ``code`` is machine-readable (the API's error code); the message is
for people and already translated; ``field`` names the form field it is about, when there is one."""

from __future__ import annotations

from core.errors import Refusal


class TeamError(Refusal):
    code = "invalid"
    status = 409  # the API's answer: a business rule refused it


class TeamInvalid(TeamError):
    """Bad input: a form error, or the API's 400 naming the field."""

    code = "invalid"
    status = 400


class TeamForbidden(TeamError):
    """A member whose role does not allow this (a non-member never gets this far: they get a 404)."""

    code = "permission_denied"
    status = 403


class LastOwner(TeamError):
    code = "last_owner"


class AlreadyMember(TeamError):
    """A 409, not a 400: the address is well-formed, and is refused only for who is in the team now.

    ``field``: the page shows it on the e-mail field."""

    code = "already_member"
    field = "email"


class InvitationUnusable(TeamError):
    """Expired, revoked, declined, already used, or addressed to someone else."""

    code = "invitation_unusable"


class TeamNotEmpty(TeamError):
    code = "team_not_empty"


class NotEnoughMoney(TeamError):
    """The paying wallet's paid balance does not cover the amount: nothing moved."""

    code = "insufficient_funds"
    field = "amount"
