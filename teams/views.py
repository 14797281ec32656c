"""Team pages: my teams, a team's members and invitations, its audit log, the invitation link, the
context switch. Thin: each POST calls one service; a team the user is not in is a 404."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from billing.models import Transaction
from billing.selectors import balance_get, runway_get, transactions_for
from core.formatting import cny
from teams import selectors, services
from teams.context import acting_team_set
from teams.errors import TeamError, TeamForbidden
from teams.forms import InviteForm, LimitsForm, MoneyMoveForm, RoleForm, TeamForm
from teams.hooks import member_usage
from teams.models import Invitation, Membership, Role
from teams.roles import Permission, membership_can

AUDIT_PAGE_SIZE = 50


def _membership_or_404(request: HttpRequest, slug: str) -> Membership:
    membership = selectors.membership_get(user=request.user, slug=slug)
    if membership is None:
        raise Http404
    return membership


def _safe_next(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def _add_error(form, error: TeamError) -> None:
    form.add_error(error.field if error.field in form.fields else None, error.message)


def _refuse(request: HttpRequest, error: TeamError) -> None:
    """A refused action on the team page: a 403 for a role that may not, a message otherwise."""
    if isinstance(error, TeamForbidden):
        raise PermissionDenied(error.message)
    messages.error(request, error.message)


def team_change(*, leave: bool = False):
    """A POST from the team's page that changes the team: the view gets the person's membership (404
    when none) and runs one service. A refusal is shown on the team's page (a 403 for a role that may
    not); the view's answer is what success says (a message, or None when it said it already), and the
    person goes back to the team's page, or to the teams list when they are no longer in it (``leave``,
    or a response of the view's own)."""

    def wrap(view: Callable[..., str | HttpResponse | None]):
        @login_required
        @require_POST
        @functools.wraps(view)
        def change(request: HttpRequest, slug: str, **kwargs) -> HttpResponse:
            membership = _membership_or_404(request, slug)
            try:
                done = view(request, membership, **kwargs)
            except TeamError as error:
                _refuse(request, error)
                return redirect("team_detail", slug=slug)
            if isinstance(done, HttpResponse):
                return done
            if done:
                messages.success(request, done)
            return redirect("teams") if leave else redirect("team_detail", slug=slug)

        return change

    return wrap


@login_required
@require_http_methods(["GET", "POST"])
def teams_index(request: HttpRequest) -> HttpResponse:
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = services.team_create(user=request.user, name=form.cleaned_data["name"])
        except TeamError as error:
            _add_error(form, error)
        else:
            messages.success(request, _("Team “%(name)s” created. Invite people to it below.") % {"name": team.name})
            return redirect("team_detail", slug=team.slug)
    context = {
        "form": form,
        "memberships": selectors.memberships_for(user=request.user),
        "invitations": selectors.invitations_pending_for(user=request.user),
    }
    return render(request, "teams/index.html", context, status=400 if form.is_bound else 200)


def _members_usage(*, team, members: list[Membership]) -> None:
    """Give each member ``usage`` (``{"spent_fen", "cards"}``: this month's spend of the instances they
    launched, and the cards those hold) from ``teams.hooks.member_usage``. Teams sit below the apps that
    know instances and the ledger, so instances answers the hook; without an answer the table shows the
    limits alone."""
    usage = member_usage(account_id=team.account_id, user_ids=[m.user_id for m in members])
    for member in members:
        member.usage = usage.get(member.user_id)


def _detail_context(request: HttpRequest, membership: Membership, **forms) -> dict:
    team = membership.team
    can = {
        "manage": membership_can(membership, Permission.TEAM_MANAGE),
        "members": membership_can(membership, Permission.TEAM_MANAGE_MEMBERS),
        "limits": membership_can(membership, Permission.BUDGETS_MANAGE),
        "audit": membership_can(membership, Permission.AUDIT_VIEW),
        "delete": membership_can(membership, Permission.TEAM_DELETE),
        "wallet": membership_can(membership, Permission.BILLING_VIEW),
    }
    members = list(selectors.team_members(team=team))
    if can["limits"]:
        _members_usage(team=team, members=members)
    owner_roles = Role.choices if membership.role == Role.OWNER else [c for c in Role.choices if c[0] != Role.OWNER]
    return {
        "team": team,
        "membership": membership,
        "members": members,
        "invitations": selectors.team_invitations_pending(team=team) if can["members"] else [],
        "can": can,
        "role_choices": owner_roles,
        "invite_form": forms.get("invite_form") or InviteForm(),
        "rename_form": forms.get("rename_form") or TeamForm(initial={"name": team.name}),
        "is_owner": membership.role == Role.OWNER,
    }


@login_required
@require_GET
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    membership = _membership_or_404(request, slug)
    return render(request, "teams/detail.html", _detail_context(request, membership))


@login_required
@require_POST
def team_invite(request: HttpRequest, slug: str) -> HttpResponse:
    membership = _membership_or_404(request, slug)
    if not membership_can(membership, Permission.TEAM_MANAGE_MEMBERS):
        raise PermissionDenied
    form = InviteForm(request.POST)
    if form.is_valid():
        try:
            invitation, _token = services.invitation_create(
                actor=request.user,
                team=membership.team,
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
                site_url=request.build_absolute_uri("/"),
            )
        except TeamForbidden as error:
            raise PermissionDenied(error.message) from error
        except TeamError as error:
            _add_error(form, error)
        else:
            messages.success(request, _("Invitation sent to %(email)s.") % {"email": invitation.email})
            return redirect("team_detail", slug=slug)
    context = _detail_context(request, membership, invite_form=form)
    return render(request, "teams/detail.html", context, status=400)


@team_change()
def team_invitation_revoke(request: HttpRequest, membership: Membership, invitation_id: int) -> str | None:
    invitation = get_object_or_404(Invitation, pk=invitation_id, team=membership.team)
    if services.invitation_revoke(actor=request.user, invitation=invitation):
        return _("The invitation to %(email)s is withdrawn.") % {"email": invitation.email}
    return None


def _member_or_404(membership: Membership, member_id: int) -> Membership:
    return get_object_or_404(Membership.objects.select_related("user", "team"), pk=member_id, team=membership.team)


@team_change()
def team_member_role(request: HttpRequest, membership: Membership, member_id: int) -> str | None:
    member = _member_or_404(membership, member_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose one of the roles."))
        return None
    role = form.cleaned_data["role"]
    services.membership_role_change(actor=request.user, membership=member, role=role)
    return _("%(who)s is now %(role)s.") % {"who": member.user.short_name, "role": Role(role).label}


@team_change()
def team_member_limits(request: HttpRequest, membership: Membership, member_id: int) -> str | None:
    member = _member_or_404(membership, member_id)
    form = LimitsForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return None
    services.membership_limits_set(
        actor=request.user,
        membership=member,
        spend_limit_fen=form.cleaned_data["spend_limit"],
        gpu_limit=form.cleaned_data["gpu_limit"],
    )
    return _("Limits of %(who)s saved.") % {"who": member.user.short_name}


@team_change()
def team_member_remove(request: HttpRequest, membership: Membership, member_id: int) -> str | HttpResponse:
    member = _member_or_404(membership, member_id)
    services.membership_remove(actor=request.user, membership=member)
    if member.user_id != request.user.pk:
        return _("%(who)s was removed from the team.") % {"who": member.user.short_name}
    messages.success(request, _("You left the team “%(name)s”.") % {"name": membership.team.name})
    return redirect("teams")  # the person removed themself: the team's page is no longer theirs


@team_change(leave=True)
def team_leave(request: HttpRequest, membership: Membership) -> str:
    services.membership_leave(user=request.user, team=membership.team)
    return _("You left the team “%(name)s”.") % {"name": membership.team.name}


@team_change(leave=True)
def team_delete(request: HttpRequest, membership: Membership) -> str:
    services.team_delete(actor=request.user, team=membership.team)
    return _("The team “%(name)s” is deleted.") % {"name": membership.team.name}


@login_required
@require_POST
def team_rename(request: HttpRequest, slug: str) -> HttpResponse:
    membership = _membership_or_404(request, slug)
    form = TeamForm(request.POST)
    if form.is_valid():
        try:
            services.team_rename(actor=request.user, team=membership.team, name=form.cleaned_data["name"])
        except TeamForbidden as error:
            raise PermissionDenied(error.message) from error
        except TeamError as error:
            _add_error(form, error)
        else:
            messages.success(request, _("The team is renamed."))
            return redirect("team_detail", slug=slug)
    if not membership_can(membership, Permission.TEAM_MANAGE):
        raise PermissionDenied
    return render(request, "teams/detail.html", _detail_context(request, membership, rename_form=form), status=400)


@login_required
@require_GET
def team_audit(request: HttpRequest, slug: str) -> HttpResponse:
    membership = _membership_or_404(request, slug)
    if not membership_can(membership, Permission.AUDIT_VIEW):
        raise PermissionDenied
    page = Paginator(selectors.team_events(team=membership.team), AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "teams/audit.html", {"team": membership.team, "membership": membership, "page": page})


@never_cache
@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """The link in the e-mail. Signed out: who invites, and log in or sign up (coming back here).
    Signed in: accept or decline. Declining needs no account."""
    found = services.invitation_by_token(token=token)
    if found is None:
        raise Http404
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "decline":
            try:
                services.invitation_decline(token=token, user=request.user)
            except TeamError as error:
                messages.error(request, error.message)
            else:
                messages.info(request, _("You declined the invitation to “%(team)s”.") % {"team": found.team.name})
            return redirect(request.path)
        if action == "accept":
            if not request.user.is_authenticated:
                return redirect_to_login(request.path)
            try:
                membership = services.invitation_accept(user=request.user, token=token)
            except TeamError as error:
                messages.error(request, error.message)
                return redirect(request.path)
            acting_team_set(request, membership.team_id)
            messages.success(
                request,
                _("Welcome to “%(team)s”. You now act in this team: switch back to Personal in the header.")
                % {"team": membership.team.name},
            )
            return redirect("team_detail", slug=membership.team.slug)
        messages.error(request, _("Choose accept or decline."))
        return redirect(request.path)
    found.refresh_from_db()
    usable = found.status == Invitation.Status.PENDING and found.team.deleted_at is None
    addressed = request.user.is_authenticated and services.invitation_addressed_to(invitation=found, user=request.user)
    context = {
        "invitation": found,
        "usable": usable and not found.is_expired(),
        "addressed_to_me": addressed,
        "next_param": request.path,
    }
    return render(request, "teams/invitation.html", context)


@login_required
@require_POST
def switch(request: HttpRequest) -> HttpResponse:
    """Act as personal (``team=personal``) or in one of one's teams (``team=<slug>``); back to ``next``."""
    target = (request.POST.get("team") or "").strip()
    fallback = reverse("dashboard")
    if target == "personal" or not target:
        acting_team_set(request, None)
        messages.info(request, _("You now act for yourself (Personal)."))
        return redirect(_safe_next(request, fallback))
    membership = _membership_or_404(request, target)
    acting_team_set(request, membership.team_id)
    messages.info(request, _("You now act in the team “%(team)s”.") % {"team": membership.team.name})
    return redirect(_safe_next(request, fallback))


# --- The team's wallet ------------------------------------------------------------------------------

WALLET_TRANSFERS_SHOWN = 20


def _wallet_context(request: HttpRequest, membership: Membership, form: MoneyMoveForm | None = None) -> dict:
    team = membership.team
    can_in = membership_can(membership, Permission.MONEY_MOVE)
    can_out = membership_can(membership, Permission.MONEY_MOVE_OUT)
    if form is None:
        form = MoneyMoveForm(initial={"key": uuid.uuid4().hex})
    if not can_out:
        form.fields["direction"].choices = [c for c in form.fields["direction"].choices if c[0] != services.MONEY_OUT]
    return {
        "team": team,
        "membership": membership,
        "balance": balance_get(user=team.account),
        "runway": runway_get(user=team.account),
        "my_balance": balance_get(user=request.user) if can_in else None,
        "transfers": list(transactions_for(user=team.account, kind=Transaction.Kind.TRANSFER)[:WALLET_TRANSFERS_SHOWN]),
        "form": form,
        "can_move": can_in or can_out,
        "can_out": can_out,
        "acting_here": getattr(request, "membership", None) is not None and request.membership.team_id == team.pk,
    }


@login_required
@require_GET
def team_wallet(request: HttpRequest, slug: str) -> HttpResponse:
    """The team's wallet: its balance and runway, the money moved in and out, and (owners, admins) the
    form that moves it. Owners, admins and billing viewers; a member gets a 403."""
    membership = _membership_or_404(request, slug)
    if not membership_can(membership, Permission.BILLING_VIEW):
        raise PermissionDenied(_("Your role in this team does not include its billing."))
    return render(request, "teams/wallet.html", _wallet_context(request, membership))


@login_required
@require_POST
def team_wallet_move(request: HttpRequest, slug: str) -> HttpResponse:
    membership = _membership_or_404(request, slug)
    if not membership_can(membership, Permission.MONEY_MOVE):
        raise PermissionDenied(_("Only the team's owners and admins move money."))
    form = MoneyMoveForm(request.POST)
    if form.is_valid():
        try:
            _txn, created = services.team_money_move(
                actor=request.user,
                team=membership.team,
                direction=form.cleaned_data["direction"],
                amount_fen=form.cleaned_data["amount"],
                key=form.cleaned_data["key"],
            )
        except TeamForbidden as error:
            raise PermissionDenied(error.message) from error
        except TeamError as error:
            _add_error(form, error)
        else:
            amount = cny(form.cleaned_data["amount"])
            if not created:
                messages.info(request, _("That transfer was already made."))
            elif form.cleaned_data["direction"] == services.MONEY_IN:
                messages.success(request, _("%(amount)s moved into the team.") % {"amount": amount})
            else:
                messages.success(request, _("%(amount)s moved out of the team into your wallet.") % {"amount": amount})
            return redirect("team_wallet", slug=slug)
    # A fresh key for the next attempt: the refused one moved nothing, and a corrected form is a new request.
    data = form.data.copy()
    data["key"] = uuid.uuid4().hex
    form.data = data
    return render(request, "teams/wallet.html", _wallet_context(request, membership, form), status=400)
