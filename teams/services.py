"""Team writes. Every service is keyword-only, checks the actor's role through ``teams.roles``, and
writes its ``TeamEvent`` in the same transaction as the change.

Changes to a team's membership take a row lock on the team first (``_lock``), so two of them never
interleave: "the last owner cannot leave" holds even when two owners leave at once.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import uuid
from datetime import datetime, timedelta

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext as _

from billing.selectors import balance_get
from billing.services import InsufficientFunds, money_transfer
from core.formatting import cny
from teams.errors import (
    AlreadyMember,
    InvitationUnusable,
    LastOwner,
    NotEnoughMoney,
    TeamForbidden,
    TeamInvalid,
    TeamNotEmpty,
)
from teams.hooks import membership_end
from teams.models import Invitation, Membership, Role, Team, TeamEvent
from teams.roles import Permission, membership_can
from teams.selectors import team_holdings

logger = logging.getLogger(__name__)

ACCOUNT_EMAIL_DOMAIN = "teams.invalid"  # RFC 2606: never delivered, so the account can receive no mail
RESERVED_SLUGS = frozenset({"switch", "invitations", "new"})  # /teams/<these>/ are pages of their own
NAME_MAX = Team._meta.get_field("name").max_length
Action = TeamEvent.Action


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _event(*, team: Team, actor, action: str, target: str = "", **details) -> TeamEvent:
    return TeamEvent.objects.create(team=team, actor=actor, action=action, target=target[:200], details=details)


def team_event_record(*, account, actor, action: str, target: str = "", details: dict | None = None) -> None:
    """Write an audit event when ``account`` is a team's account (a no-op for a personal account).

    For the resource apps above teams: an instance launched, stopped or released in a team, a token
    created for it. Call it inside the transaction that makes the change.
    """
    team = Team.objects.filter(account_id=getattr(account, "pk", account)).first()
    if team is not None:
        _event(team=team, actor=actor, action=action, target=target, **(details or {}))


def _lock(team: Team) -> Team:
    return Team.objects.select_for_update().get(pk=team.pk)


def _membership(*, team: Team, user) -> Membership | None:
    return Membership.objects.filter(team=team, user=user).first()


def _require(*, team: Team, user, perm: str) -> Membership:
    """The actor's membership, if its role grants ``perm``; ``TeamForbidden`` otherwise."""
    membership = _membership(team=team, user=user)
    if not membership_can(membership, perm):
        raise TeamForbidden(_("Your role in this team does not allow this."))
    return membership


def _clean_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise TeamInvalid(_("Give the team a name."), field="name")
    if len(name) > NAME_MAX:
        raise TeamInvalid(_("At most %(n)d characters.") % {"n": NAME_MAX}, field="name")
    if "\x00" in name:
        raise TeamInvalid(_("The name may not contain NUL characters."), field="name")
    return name


def _clean_role(role: str) -> str:
    if role not in Role.values:
        raise TeamInvalid(_("Choose one of the roles."), field="role")
    return role


def _slug_candidates(name: str):
    base = slugify(name)[:50].strip("-") or "team"
    if base in RESERVED_SLUGS:
        base = f"{base}-team"
    yield base
    for n in range(2, 100):
        yield f"{base}-{n}"
    while True:
        yield f"{base}-{secrets.token_hex(3)}"


# --- Teams ------------------------------------------------------------------------------------------


def team_create(*, user, name: str) -> Team:
    """Create a team with its own account; ``user`` becomes its owner.

    The account gets no trial credit: claiming it needs a verified e-mail address, and the account's
    address is under ``.invalid`` with no ``EmailAddress`` row, so ``billing.services.trial_claim``
    refuses it (and nothing grants credit when a user row is created).
    """
    name = _clean_name(name)
    with transaction.atomic():
        account = get_user_model().objects.create_user(
            email=f"team-{uuid.uuid4().hex}@{ACCOUNT_EMAIL_DOMAIN}", password=None, display_name=name[:80]
        )
        for slug in _slug_candidates(name):
            if Team.objects.filter(slug=slug).exists():
                continue
            try:
                with transaction.atomic():
                    team = Team.objects.create(name=name, slug=slug, account=account, created_by=user)
                break
            except IntegrityError:  # taken a moment ago by a concurrent create: try the next one
                continue
        Membership.objects.create(team=team, user=user, role=Role.OWNER)
        _event(team=team, actor=user, action=Action.TEAM_CREATED, target=name)
    return team


def team_rename(*, actor, team: Team, name: str) -> Team:
    name = _clean_name(name)
    with transaction.atomic():
        team = _lock(team)
        _require(team=team, user=actor, perm=Permission.TEAM_MANAGE)
        if name == team.name:
            return team
        old = team.name
        team.name = name
        team.save(update_fields=["name"])
        get_user_model().objects.filter(pk=team.account_id).update(display_name=name)
        _event(team=team, actor=actor, action=Action.TEAM_RENAMED, target=name, old=old, new=name)
    return team


def team_delete(*, actor, team: Team) -> None:
    """Delete a team (owners only) whose account holds nothing: no instance that is not released, no
    volume, no money. The team's row, its account and its audit log stay (the ledger and old instances
    point at the account); the account is deactivated, members and pending invitations go, and the slug
    is freed."""
    with transaction.atomic():
        team = _lock(team)
        _require(team=team, user=actor, perm=Permission.TEAM_DELETE)
        holdings = team_holdings(team=team)
        if not holdings.empty:
            raise TeamNotEmpty(
                _(
                    "Release the team's instances (%(instances)d), delete its volumes (%(volumes)d) and "
                    "bring its balance to zero (now ¥%(balance).2f) before deleting it."
                )
                % {
                    "instances": holdings.instances,
                    "volumes": holdings.volumes,
                    "balance": holdings.balance_fen / 100,
                }
            )
        now = timezone.now()
        _event(team=team, actor=actor, action=Action.TEAM_DELETED, target=team.name, slug=team.slug)
        team.memberships.all().delete()
        team.invitations.filter(status=Invitation.Status.PENDING).update(
            status=Invitation.Status.REVOKED, decided_at=now
        )
        team.deleted_at = now
        # "~" never comes out of slugify, so the freed slug cannot collide with a live team's.
        team.slug = f"~{team.pk}~{team.slug}"[:64]
        team.save(update_fields=["deleted_at", "slug"])
        get_user_model().objects.filter(pk=team.account_id).update(is_active=False)


# --- Invitations ------------------------------------------------------------------------------------


def invitation_accept_url(*, site_url: str, token: str) -> str:
    return site_url.rstrip("/") + reverse("team_invitation", args=[token])


def invitation_create(*, actor, team: Team, email: str, role: str, site_url: str) -> tuple[Invitation, str]:
    """Invite ``email`` to ``team`` with ``role`` and e-mail them the link; returns it with its token.

    Re-inviting an address with a pending invitation replaces it (the old link stops working).
    Inviting someone who is already a member is refused. Only an owner may invite an owner.
    ``site_url`` is the console's address as the inviter sees it (the link's start).
    """
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise TeamInvalid(_("Enter a valid e-mail address."), field="email") from None
    role = _clean_role(role)
    raw = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        team = _lock(team)
        mine = _require(team=team, user=actor, perm=Permission.TEAM_MANAGE_MEMBERS)
        if role == Role.OWNER and mine.role != Role.OWNER:
            raise TeamForbidden(_("Only an owner can invite an owner."))
        if team.memberships.filter(user__email__iexact=email).exists():
            raise AlreadyMember(_("%(email)s is already a member of this team.") % {"email": email})
        replaced = team.invitations.filter(status=Invitation.Status.PENDING, email__iexact=email).update(
            status=Invitation.Status.REVOKED, decided_at=now
        )
        invitation = Invitation.objects.create(
            team=team,
            email=email,
            role=role,
            digest=token_digest(raw),
            invited_by=actor,
            created_at=now,
            expires_at=now + timedelta(hours=int(settings.TEAMS_INVITATION_TTL_H)),
        )
        _event(team=team, actor=actor, action=Action.MEMBER_INVITED, target=email, role=role, replaced=bool(replaced))
    _invitation_mail(invitation=invitation, url=invitation_accept_url(site_url=site_url, token=raw))
    return invitation, raw


def _invitation_mail(*, invitation: Invitation, url: str) -> None:
    """The invitation e-mail, in the inviter's language (the one active for their request)."""
    inviter = invitation.invited_by
    context = {
        "site": settings.CONSOLE_SITE_NAME,
        "team": invitation.team.name,
        "inviter": inviter.short_name if inviter else settings.CONSOLE_SITE_NAME,
        "role": Role(invitation.role).label,
        "url": url,
        "expires": timezone.localtime(invitation.expires_at).strftime("%Y-%m-%d %H:%M"),
    }
    subject = _("[%(site)s] %(inviter)s invited you to the team %(team)s") % context
    body = (
        _(
            "Hello,\n\n%(inviter)s invited you to join the team “%(team)s” on %(site)s as %(role)s.\n\n"
            "Accept or decline here (log in or sign up with this e-mail address first):\n%(url)s\n\n"
            "The link works until %(expires)s. If you did not expect this, ignore this e-mail.\n"
        )
        % context
    )
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [invitation.email])
    except Exception:  # the invitation stands; the inviter can send it again from the team page
        logger.exception("the invitation e-mail for invitation %s failed", invitation.pk)


def invitation_revoke(*, actor, invitation: Invitation) -> bool:
    """Withdraw a pending invitation; ``False`` when it was no longer pending (nothing to do)."""
    with transaction.atomic():
        team = _lock(invitation.team)
        _require(team=team, user=actor, perm=Permission.TEAM_MANAGE_MEMBERS)
        moved = Invitation.objects.filter(pk=invitation.pk, status=Invitation.Status.PENDING).update(
            status=Invitation.Status.REVOKED, decided_at=timezone.now()
        )
        if moved:
            _event(team=team, actor=actor, action=Action.INVITATION_REVOKED, target=invitation.email)
    return bool(moved)


def invitation_by_token(*, token: str) -> Invitation | None:
    if not token or "\x00" in token or len(token) > 200:
        return None
    return Invitation.objects.select_related("team", "invited_by").filter(digest=token_digest(token)).first()


def _usable(invitation: Invitation | None, *, now: datetime) -> Invitation:
    if invitation is None or invitation.team.deleted_at is not None:
        raise InvitationUnusable(_("This invitation link is not valid."))
    if invitation.status == Invitation.Status.PENDING and invitation.expires_at <= now:
        raise InvitationUnusable(_("This invitation has expired. Ask the team for a new one."))
    messages = {
        Invitation.Status.ACCEPTED: _("This invitation has already been accepted."),
        Invitation.Status.DECLINED: _("This invitation was declined."),
        Invitation.Status.REVOKED: _("This invitation was withdrawn. Ask the team for a new one."),
        Invitation.Status.EXPIRED: _("This invitation has expired. Ask the team for a new one."),
    }
    if invitation.status in messages:
        raise InvitationUnusable(messages[invitation.status])
    return invitation


def invitation_addressed_to(*, invitation: Invitation, user) -> bool:
    """Whether ``invitation`` was sent to one of ``user``'s verified addresses: only they may accept it,
    so a forwarded or leaked link is no way in."""
    return EmailAddress.objects.filter(user=user, verified=True, email__iexact=invitation.email).exists()


def invitation_accept(*, user, token: str) -> Membership:
    """Join the team with the invitation's role. Refused (``InvitationUnusable``) when the link is
    expired, revoked, declined or used, or was sent to an address that is not one of ``user``'s."""
    now = timezone.now()
    with transaction.atomic():
        found = invitation_by_token(token=token)
        if found is not None:
            _lock(found.team)
            found = Invitation.objects.select_related("team").get(pk=found.pk)
        invitation = _usable(found, now=now)
        if not invitation_addressed_to(invitation=invitation, user=user):
            raise InvitationUnusable(
                _("This invitation was sent to %(email)s. Log in with that address to accept it.")
                % {"email": invitation.email}
            )
        membership = _membership(team=invitation.team, user=user)
        if membership is None:
            membership = Membership.objects.create(team=invitation.team, user=user, role=invitation.role)
            _event(
                team=invitation.team,
                actor=user,
                action=Action.MEMBER_JOINED,
                target=user.email,
                role=invitation.role,
                invitation=invitation.pk,
            )
        Invitation.objects.filter(pk=invitation.pk).update(
            status=Invitation.Status.ACCEPTED, decided_at=now, accepted_by=user
        )
    return membership


def invitation_decline(*, token: str, user=None) -> Invitation:
    """Say no. Holding the link is enough (it went to the invitee's mailbox): no account is needed."""
    now = timezone.now()
    with transaction.atomic():
        found = invitation_by_token(token=token)
        if found is not None:
            _lock(found.team)
            found = Invitation.objects.select_related("team").get(pk=found.pk)
        invitation = _usable(found, now=now)
        Invitation.objects.filter(pk=invitation.pk).update(status=Invitation.Status.DECLINED, decided_at=now)
        actor = user if getattr(user, "is_authenticated", False) else None
        _event(team=invitation.team, actor=actor, action=Action.INVITATION_DECLINED, target=invitation.email)
    invitation.refresh_from_db()
    return invitation


def invitations_expire(*, now: datetime | None = None) -> int:
    """Mark every pending invitation past its time expired; returns how many. Safe to run twice."""
    now = now or timezone.now()
    return Invitation.objects.filter(status=Invitation.Status.PENDING, expires_at__lte=now).update(
        status=Invitation.Status.EXPIRED, decided_at=now
    )


# --- Members ----------------------------------------------------------------------------------------


def _owners_after(*, team: Team, losing: Membership) -> int:
    return team.memberships.filter(role=Role.OWNER).exclude(pk=losing.pk).count()


def membership_role_change(*, actor, membership: Membership, role: str) -> Membership:
    """Give a member another role. Owners alone make or unmake owners; the last owner keeps the role."""
    role = _clean_role(role)
    with transaction.atomic():
        team = _lock(membership.team)
        mine = _require(team=team, user=actor, perm=Permission.TEAM_MANAGE_MEMBERS)
        membership = Membership.objects.select_related("user").get(pk=membership.pk, team=team)
        old = membership.role
        if old == role:
            return membership
        if Role.OWNER in (old, role) and mine.role != Role.OWNER:
            raise TeamForbidden(_("Only an owner can make or unmake an owner."))
        if old == Role.OWNER and _owners_after(team=team, losing=membership) == 0:
            raise LastOwner(_("A team needs an owner: make someone else owner first."))
        membership.role = role
        membership.save(update_fields=["role"])
        _event(team=team, actor=actor, action=Action.ROLE_CHANGED, target=membership.user.email, old=old, new=role)
    return membership


def _membership_ended(*, team: Team, user) -> None:
    """Tell the apps above (``teams.hooks.membership_end``) that ``user`` is no longer in ``team``, in the
    same transaction: what they hold on the person's behalf (the share links they made) ends with the
    membership. Teams cannot import those apps, so they answer the hook."""
    membership_end(account=team.account, user=user)


def membership_remove(*, actor, membership: Membership) -> None:
    """Take someone out of the team. Only an owner removes an owner; the last owner stays. Removing
    oneself is leaving."""
    if membership.user_id == actor.pk:
        membership_leave(user=actor, team=membership.team)
        return
    with transaction.atomic():
        team = _lock(membership.team)
        mine = _require(team=team, user=actor, perm=Permission.TEAM_MANAGE_MEMBERS)
        membership = Membership.objects.select_related("user").get(pk=membership.pk, team=team)
        if membership.role == Role.OWNER:
            if mine.role != Role.OWNER:
                raise TeamForbidden(_("Only an owner can remove an owner."))
            if _owners_after(team=team, losing=membership) == 0:
                raise LastOwner(_("A team needs an owner: make someone else owner first."))
        membership.delete()
        _membership_ended(team=team, user=membership.user)
        _event(team=team, actor=actor, action=Action.MEMBER_REMOVED, target=membership.user.email, role=membership.role)


def membership_leave(*, user, team: Team) -> None:
    """Leave a team. The last owner cannot: they make someone else owner, or delete the team."""
    with transaction.atomic():
        team = _lock(team)
        membership = _membership(team=team, user=user)
        if membership is None:
            return
        if membership.role == Role.OWNER and _owners_after(team=team, losing=membership) == 0:
            raise LastOwner(_("You are the team's last owner: make someone else owner first, or delete the team."))
        membership.delete()
        _membership_ended(team=team, user=user)
        _event(team=team, actor=user, action=Action.MEMBER_LEFT, target=user.email, role=membership.role)


def membership_limits_set(
    *, actor, membership: Membership, spend_limit_fen: int | None, gpu_limit: int | None
) -> Membership:
    """Set a member's monthly spend limit (fen) and GPU card limit; ``None`` lifts a limit."""
    if spend_limit_fen is not None and (not isinstance(spend_limit_fen, int) or spend_limit_fen < 0):
        raise TeamInvalid(_("The spend limit cannot be negative."), field="spend_limit_fen")
    if gpu_limit is not None and (not isinstance(gpu_limit, int) or gpu_limit < 0):
        raise TeamInvalid(_("The GPU limit cannot be negative."), field="gpu_limit")
    with transaction.atomic():
        team = _lock(membership.team)
        _require(team=team, user=actor, perm=Permission.BUDGETS_MANAGE)
        membership = Membership.objects.select_related("user").get(pk=membership.pk, team=team)
        old = {"spend_limit_fen": membership.spend_limit_fen, "gpu_limit": membership.gpu_limit}
        new = {"spend_limit_fen": spend_limit_fen, "gpu_limit": gpu_limit}
        if old == new:
            return membership
        membership.spend_limit_fen, membership.gpu_limit = spend_limit_fen, gpu_limit
        membership.save(update_fields=["spend_limit_fen", "gpu_limit"])
        _event(team=team, actor=actor, action=Action.LIMITS_CHANGED, target=membership.user.email, old=old, new=new)
    return membership


def membership_update(
    *, actor, membership: Membership, role: str | None = None, limits: dict | None = None
) -> Membership:
    """The API's PATCH: a new role and/or limits, all or nothing. ``limits`` holds the keys given
    (``spend_limit_fen``, ``gpu_limit``); a key left out keeps its value."""
    with transaction.atomic():
        if role is not None:
            membership = membership_role_change(actor=actor, membership=membership, role=role)
        if limits:
            membership = membership_limits_set(
                actor=actor,
                membership=membership,
                spend_limit_fen=limits.get("spend_limit_fen", membership.spend_limit_fen),
                gpu_limit=limits.get("gpu_limit", membership.gpu_limit),
            )
        if role is None and not limits:
            _require(team=membership.team, user=actor, perm=Permission.TEAM_MANAGE_MEMBERS)
    return membership


# --- Money ------------------------------------------------------------------------------------------

MONEY_IN, MONEY_OUT = "in", "out"  # into the team from one's own wallet; out of the team into one's own
MONEY_MOVE_MAX_FEN = 10**12  # ¥10 billion: a bound the schema can state, far above any real amount


def team_money_move(*, actor, team: Team, direction: str, amount_fen: int, key: str):
    """Move paid money between ``actor``'s own wallet and the team's, in one ledger transaction.

    ``in``: owners and admins pay into the team (``Permission.MONEY_MOVE``); ``out``: owners take the
    team's money back into their own wallet (``Permission.MONEY_MOVE_OUT``). Only paid money moves,
    never trial credit. ``billing.services.money_transfer`` locks both wallets in id order and checks
    the paying one under the lock, so a short balance moves nothing (``NotEnoughMoney``) and no fen is
    made or lost; ``key`` (the form's or the API's idempotency key) makes a repeat move once, and the
    ``money_moved`` audit event is written once, in the same transaction. Returns ``(transaction,
    created)``.
    """
    if direction not in (MONEY_IN, MONEY_OUT):
        raise TeamInvalid(_("Choose into the team or out of it."), field="direction")
    if not isinstance(amount_fen, int) or isinstance(amount_fen, bool) or amount_fen <= 0:
        raise TeamInvalid(_("Enter an amount above zero."), field="amount")
    if amount_fen > MONEY_MOVE_MAX_FEN:
        raise TeamInvalid(_("That amount is too large."), field="amount")
    key = (key or "").strip()
    if not key or len(key) > 100 or "\x00" in key:
        raise TeamInvalid(_("The request lacks a valid key: reload the page and try again."), field="key")
    perm = Permission.MONEY_MOVE if direction == MONEY_IN else Permission.MONEY_MOVE_OUT
    with transaction.atomic():
        _require(team=team, user=actor, perm=perm)
        account = team.account
        payer, payee = (actor, account) if direction == MONEY_IN else (account, actor)
        try:
            txn, created = money_transfer(
                payer=payer,
                payee=payee,
                amount_fen=amount_fen,
                key=f"team:{team.pk}:{actor.pk}:{key}",
                created_by=actor,
                description=(
                    f"Moved into team {team.name}" if direction == MONEY_IN else f"Moved out of team {team.name}"
                ),
                metadata={"team": team.pk, "direction": direction},
            )
        except InsufficientFunds:
            have = balance_get(user=payer).cash
            if direction == MONEY_IN:
                message = _("Your paid balance is %(have)s: it does not cover %(amount)s. Nothing was moved.")
            else:
                message = _("The team's paid balance is %(have)s: it does not cover %(amount)s. Nothing was moved.")
            raise NotEnoughMoney(message % {"have": cny(have), "amount": cny(amount_fen)}) from None
        if created:
            _event(
                team=team,
                actor=actor,
                action=Action.MONEY_MOVED,
                target=actor.email,
                direction=direction,
                amount_fen=amount_fen,
                transaction=txn.pk,
            )
    return txn, created
