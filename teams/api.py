"""The REST API for teams: the same services and rules as the pages.

A team the caller is not in is a 404 (``selectors.membership_get``); a role that may not do
something is a 403 with ``code: permission_denied``; a business rule's refusal is a 409 whose
``code`` says which (``last_owner``, ``team_not_empty``, ``invitation_unusable``); bad input is a 400.
"""

from __future__ import annotations

import hashlib
import uuid

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import APIToken
from billing.selectors import balance_get, runway_get
from core.drf import PersonalTokenForChanges, ServiceError
from idempotency.decorators import IDEMPOTENCY_KEY_PARAMETER, idempotent
from teams import selectors, services
from teams.errors import TeamError
from teams.models import Invitation, Membership, Role, Team, TeamEvent
from teams.roles import Permission, membership_can
from teams.serializers import (
    InvitationCreateSerializer,
    InvitationSerializer,
    MemberSerializer,
    MemberUpdateSerializer,
    MoneyMovedSerializer,
    MoneyMoveSerializer,
    TeamCreateSerializer,
    TeamEventSerializer,
    TeamSerializer,
    TeamWalletSerializer,
)


def _raise(error: TeamError):
    if error.status == 400:
        raise exceptions.ValidationError({error.field or "non_field_errors": [error.message]}) from error
    if error.status == 403:
        raise exceptions.PermissionDenied(detail=error.message, code=error.code) from error
    raise ServiceError(detail=error.message, code=error.code) from error


# --- Views ----------------------------------------------------------------------------------------


def _token_teams(request, team_id) -> set:
    """The teams this request may reach: a token scoped to a team reaches that one alone (another of
    its maker's teams is not found); a personal token or the session reach ``team_id``."""
    token = getattr(request, "auth", None)
    if isinstance(token, APIToken) and token.team_id is not None:
        return {token.team_id}
    return {team_id}


class _InTeam:
    """The caller's membership of the team in the URL: a 404 when they are not in it."""

    def membership(self) -> Membership:
        if not hasattr(self, "_membership"):
            found = selectors.membership_get(user=self.request.user, slug=self.kwargs["slug"])
            if found is None or found.team_id not in _token_teams(self.request, found.team_id):
                raise Http404
            self._membership = found
        return self._membership

    def require(self, perm: str) -> Membership:
        membership = self.membership()
        if not membership_can(membership, perm):
            raise exceptions.PermissionDenied(_("Your role in this team does not allow this."))
        return membership


@extend_schema_view(
    list=extend_schema(summary="List your teams"),
    retrieve=extend_schema(summary="Get a team"),
    create=extend_schema(summary="Create a team", request=TeamCreateSerializer, responses={201: TeamSerializer}),
)
@extend_schema(tags=["teams"])
class TeamViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    # A token scoped to a team acts for that team: it cannot found another in its maker's name.
    permission_classes = [permissions.IsAuthenticated, PersonalTokenForChanges]
    serializer_class = TeamSerializer
    lookup_field = "slug"
    lookup_value_regex = "[-a-zA-Z0-9_]+"

    def _memberships(self):
        return selectors.memberships_for(user=self.request.user)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Team.objects.none()
        teams = Team.objects.filter(pk__in=self._memberships().values("team_id"))
        token = getattr(self.request, "auth", None)
        if isinstance(token, APIToken) and token.team_id is not None:
            teams = teams.filter(pk=token.team_id)
        return teams.order_by("name", "id")

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["roles"] = dict(self._memberships().values_list("team_id", "role"))
        return context

    def create(self, request, *args, **kwargs) -> Response:
        body = TeamCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            team = services.team_create(user=request.user, name=body.validated_data["name"])
        except TeamError as error:
            _raise(error)
        return Response(TeamSerializer(team, context={"roles": {team.pk: Role.OWNER}}).data, status=201)


_LAST_OWNER = OpenApiResponse(description="`last_owner`: the team's last owner keeps the role and cannot leave.")


@extend_schema_view(
    list=extend_schema(summary="List a team's members"),
    partial_update=extend_schema(
        summary="Change a member's role or limits",
        description="Admins and owners. Only an owner makes or unmakes an owner; the last owner keeps the role.",
        request=MemberUpdateSerializer,
        responses={
            200: MemberSerializer,
            403: OpenApiResponse(description="Your role does not allow this."),
            409: _LAST_OWNER,
        },
    ),
    destroy=extend_schema(
        summary="Remove a member (or leave, for yourself)",
        responses={204: None, 403: OpenApiResponse(description="Your role does not allow this."), 409: _LAST_OWNER},
    ),
)
@extend_schema(tags=["teams"])
class MemberViewSet(_InTeam, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = MemberSerializer
    http_method_names = ["get", "patch", "delete", "head", "options"]
    lookup_value_converter = "int"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Membership.objects.none()
        return selectors.team_members(team=self.membership().team)

    def partial_update(self, request, *args, **kwargs) -> Response:
        self.membership()
        member = get_object_or_404(self.get_queryset(), pk=kwargs["pk"])
        body = MemberUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            member = services.membership_update(
                actor=request.user,
                membership=member,
                role=data.get("role"),
                limits={k: data[k] for k in ("spend_limit_fen", "gpu_limit") if k in data},
            )
        except TeamError as error:
            _raise(error)
        return Response(MemberSerializer(member).data)

    def destroy(self, request, *args, **kwargs) -> Response:
        member = get_object_or_404(self.get_queryset(), pk=kwargs["pk"])
        try:
            services.membership_remove(actor=request.user, membership=member)
        except TeamError as error:
            _raise(error)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(
    list=extend_schema(
        summary="List a team's invitations",
        responses={200: InvitationSerializer(many=True), 403: OpenApiResponse(description="Admins and owners.")},
    ),
    create=extend_schema(
        summary="Invite someone by e-mail",
        description="Re-inviting a pending address replaces its invitation; inviting a member is refused (409).",
        request=InvitationCreateSerializer,
        responses={
            201: InvitationSerializer,
            403: OpenApiResponse(description="Admins and owners."),
            409: OpenApiResponse(description="`already_member`: the address is a member's already."),
        },
    ),
)
@extend_schema(tags=["teams"])
class InvitationViewSet(_InTeam, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = InvitationSerializer
    lookup_value_converter = "int"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Invitation.objects.none()
        return selectors.team_invitations(team=self.require(Permission.TEAM_MANAGE_MEMBERS).team)

    def create(self, request, *args, **kwargs) -> Response:
        membership = self.require(Permission.TEAM_MANAGE_MEMBERS)
        body = InvitationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            invitation, _token = services.invitation_create(
                actor=request.user,
                team=membership.team,
                email=body.validated_data["email"],
                role=body.validated_data["role"],
                site_url=request.build_absolute_uri("/"),
            )
        except TeamError as error:
            _raise(error)
        return Response(InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Revoke a pending invitation",
        request=None,
        responses={200: InvitationSerializer, 403: OpenApiResponse(description="Admins and owners.")},
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request, *args, **kwargs) -> Response:
        invitation = get_object_or_404(self.get_queryset(), pk=kwargs["pk"])
        try:
            services.invitation_revoke(actor=request.user, invitation=invitation)
        except TeamError as error:
            _raise(error)
        invitation.refresh_from_db()
        return Response(InvitationSerializer(invitation).data)


@extend_schema_view(
    list=extend_schema(
        summary="A team's audit log, newest first",
        responses={200: TeamEventSerializer(many=True), 403: OpenApiResponse(description="Admins and owners.")},
    ),
)
@extend_schema(tags=["teams"])
class TeamEventViewSet(_InTeam, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = TeamEventSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return TeamEvent.objects.none()
        return selectors.team_events(team=self.require(Permission.AUDIT_VIEW).team)


# --- The team's wallet ----------------------------------------------------------------------------


def _wallet_body(account) -> dict:
    balance, runway = balance_get(user=account), runway_get(user=account)
    return {
        "cash_fen": balance.cash,
        "trial_fen": balance.trial,
        "total_fen": balance.total,
        "owed_fen": runway.owed_fen,
        "burn_fen_per_hour": runway.burn_fen_per_hour,
        "runway_seconds": runway.seconds,
    }


@extend_schema(tags=["teams"])
class TeamWalletView(_InTeam, APIView):
    @extend_schema(
        summary="A team's balance and runway",
        responses={200: TeamWalletSerializer, 403: OpenApiResponse(description="Owners, admins, billing viewers.")},
    )
    def get(self, request, slug: str) -> Response:
        membership = self.require(Permission.BILLING_VIEW)
        return Response(TeamWalletSerializer(_wallet_body(membership.team.account)).data)


@extend_schema(tags=["teams"])
class TeamMoneyMoveView(_InTeam, APIView):
    @extend_schema(
        summary="Move paid money into or out of a team",
        description="One ledger transaction between your paid balance and the team's. `in`: owners and admins; "
        "`out`: owners. A short balance is a 409 `insufficient_funds` and moves nothing. With an "
        "`Idempotency-Key`, a retry moves the money once.",
        request=MoneyMoveSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: MoneyMovedSerializer, 403: OpenApiResponse(description="Your role does not allow this.")},
    )
    @idempotent
    def post(self, request, slug: str) -> Response:
        membership = self.membership()
        body = MoneyMoveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        header = request.headers.get("Idempotency-Key")
        key = hashlib.sha256(header.encode()).hexdigest() if header else uuid.uuid4().hex
        try:
            txn, _created = services.team_money_move(
                actor=request.user,
                team=membership.team,
                direction=body.validated_data["direction"],
                amount_fen=body.validated_data["amount_fen"],
                key=key,
            )
        except TeamError as error:
            _raise(error)
        data = {
            "transaction": txn.pk,
            "direction": body.validated_data["direction"],
            "amount_fen": body.validated_data["amount_fen"],
            "team_cash_fen": balance_get(user=membership.team.account).cash,
            "your_cash_fen": balance_get(user=request.user).cash,
        }
        return Response(MoneyMovedSerializer(data).data, status=status.HTTP_201_CREATED)
