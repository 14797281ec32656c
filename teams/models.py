"""Teams: a team is an account (its own ``accounts.User`` row) that people act for, with roles.

The team's wallet, quota, instances, volumes and deployments belong to ``Team.account``, exactly as a
person's belong to them, so billing and the resource apps need no notion of teams. Who acts is
``request.user``; whose resources and money they act on is ``request.principal`` (``teams.context``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from billing.models import AppendOnlyModel


class Role(models.TextChoices):
    """What a member may do is ``teams.roles.ROLE_PERMISSIONS[role]``; the choices only name them."""

    OWNER = "owner", _("Owner")  # everything, including deleting the team and moving money out
    ADMIN = "admin", _("Admin")  # members, budgets, quota requests, every resource
    MEMBER = "member", _("Member")  # launches and operates their own resources; sees the team's
    BILLING = "billing", _("Billing viewer")  # statements and spend only


ROLE_BADGE = {Role.OWNER: "indigo", Role.ADMIN: "blue", Role.MEMBER: "", Role.BILLING: "yellow"}


class Team(models.Model):
    """A group of people sharing one account: one wallet, one quota, one fleet.

    ``account`` is the user row that owns the team's resources and ledger accounts. It has no usable
    password and an address under ``.invalid`` (RFC 2606), so nobody can log in as it or receive its
    mail, and it never claims trial credit (that needs a verified address). ``deleted_at`` marks a
    deleted team: its account stays (the ledger and old instances point at it) but is deactivated.
    """

    name = models.CharField(_("name"), max_length=80)
    slug = models.SlugField(_("slug"), max_length=64, unique=True)
    account = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="team", verbose_name=_("account")
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", verbose_name=_("created by")
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    deleted_at = models.DateTimeField(_("deleted"), null=True, blank=True)

    class Meta:
        ordering = ["name", "id"]
        verbose_name = _("team")
        verbose_name_plural = _("teams")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """One person in one team, with a role and optional limits of their own inside the team's.

    ``spend_limit_fen`` caps what the member may spend of the team's money per calendar month;
    ``gpu_limit`` caps the cards they may hold at once. ``None`` means no limit of their own.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships")
    role = models.CharField(_("role"), max_length=16, choices=Role.choices, default=Role.MEMBER)
    spend_limit_fen = models.BigIntegerField(_("monthly spend limit (fen)"), null=True, blank=True)
    gpu_limit = models.PositiveIntegerField(_("GPU card limit"), null=True, blank=True)
    created_at = models.DateTimeField(_("joined"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="teams_membership_unique"),
            models.CheckConstraint(
                condition=models.Q(spend_limit_fen__isnull=True) | models.Q(spend_limit_fen__gte=0),
                name="teams_membership_spend_limit_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def role_badge(self) -> str:
        return ROLE_BADGE.get(self.role, "")


class Invitation(models.Model):
    """An e-mailed invitation to join a team with a role.

    Only the SHA-256 digest of the link's token is stored: the link is in the e-mail and nowhere else.
    At most one pending invitation per team and address (re-inviting replaces it).
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")  # sent; the link works until expires_at
        ACCEPTED = "accepted", _("Accepted")  # the invitee joined
        DECLINED = "declined", _("Declined")  # the invitee said no
        REVOKED = "revoked", _("Revoked")  # withdrawn by the team (or replaced by a newer one)
        EXPIRED = "expired", _("Expired")  # not answered in time

    BADGE_COLOURS = {
        Status.PENDING: "yellow",
        Status.ACCEPTED: "green",
        Status.DECLINED: "red",
        Status.REVOKED: "",
        Status.EXPIRED: "",
    }

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(_("e-mail address"))
    role = models.CharField(_("role"), max_length=16, choices=Role.choices, default=Role.MEMBER)
    digest = models.CharField(max_length=64, unique=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("invited by")
    )
    created_at = models.DateTimeField(_("sent"), default=timezone.now)
    expires_at = models.DateTimeField(_("expires"))
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("invitation")
        verbose_name_plural = _("invitations")
        constraints = [
            models.UniqueConstraint(
                "team",
                Lower("email"),
                condition=models.Q(status="pending"),
                name="teams_invitation_one_pending_per_address",
            )
        ]

    def __str__(self) -> str:
        return f"{self.email} → {self.team}"

    @property
    def status_badge(self) -> str:
        return self.BADGE_COLOURS.get(self.status, "")

    def is_expired(self, now=None) -> bool:
        """Past its time, whether or not the periodic task has marked it yet."""
        return self.status == self.Status.EXPIRED or self.expires_at <= (now or timezone.now())


class TeamEvent(AppendOnlyModel):
    """The team's audit log: who did what, when. Append-only: rows are never edited or deleted.

    ``target`` is a short human-readable name of what was acted on (an address, an instance's name);
    ``details`` holds the specifics (old and new role, amounts, limits).
    """

    class Action(models.TextChoices):
        TEAM_CREATED = "team_created", _("Team created")
        TEAM_RENAMED = "team_renamed", _("Team renamed")
        TEAM_DELETED = "team_deleted", _("Team deleted")
        MEMBER_INVITED = "member_invited", _("Member invited")
        INVITATION_REVOKED = "invitation_revoked", _("Invitation revoked")
        INVITATION_DECLINED = "invitation_declined", _("Invitation declined")
        MEMBER_JOINED = "member_joined", _("Member joined")
        MEMBER_LEFT = "member_left", _("Member left")
        MEMBER_REMOVED = "member_removed", _("Member removed")
        ROLE_CHANGED = "role_changed", _("Role changed")
        LIMITS_CHANGED = "limits_changed", _("Limits changed")
        MONEY_MOVED = "money_moved", _("Money moved")
        INSTANCE_LAUNCHED = "instance_launched", _("Instance launched")
        INSTANCE_STOPPED = "instance_stopped", _("Instance stopped")
        INSTANCE_STARTED = "instance_started", _("Instance started")
        INSTANCE_RELEASED = "instance_released", _("Instance released")
        INSTANCE_RESIZED = "instance_resized", _("Instance resized")
        TOKEN_CREATED = "token_created", _("API token created")
        TOKEN_REVOKED = "token_revoked", _("API token revoked")
        QUOTA_REQUESTED = "quota_requested", _("Quota requested")
        BUDGET_CHANGED = "budget_changed", _("Budget changed")
        VOLUME_CREATED = "volume_created", _("Volume created")
        VOLUME_DELETED = "volume_deleted", _("Volume deleted")
        APP_DEPLOYED = "app_deployed", _("App deployed")
        APP_REMOVED = "app_removed", _("Deployment deleted")
        SECRET_SAVED = "secret_saved", _("Secret saved")
        SECRET_DELETED = "secret_deleted", _("Secret deleted")
        IMAGE_SAVED = "image_saved", _("Image saved")
        IMAGE_IMPORTED = "image_imported", _("Image imported")
        IMAGE_SHARED = "image_shared", _("Image shared or unshared")
        IMAGE_DELETED = "image_deleted", _("Image deleted")
        SNAPSHOT_TAKEN = "snapshot_taken", _("Snapshot taken")
        SNAPSHOT_RESTORED = "snapshot_restored", _("Snapshot restored")
        SNAPSHOT_DELETED = "snapshot_deleted", _("Snapshot deleted")

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="events")
    # PROTECT, as the ledger's: a cascade's SET_NULL would edit history (and the append-only guard refuses it).
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(_("action"), max_length=32, choices=Action.choices)
    target = models.CharField(_("target"), max_length=200, blank=True)
    details = models.JSONField(_("details"), default=dict, blank=True)
    created_at = models.DateTimeField(_("when"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("team event")
        verbose_name_plural = _("team events")
        indexes = [models.Index(fields=["team", "-created_at"], name="teams_event_team_created")]

    def __str__(self) -> str:
        return f"{self.team}: {self.action}"
