"""The REST API's serializers for teams: what its endpoints take and give."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from core.drf import StrictJsonTypes
from teams import services
from teams.models import Invitation, Membership, Role, Team, TeamEvent

SPEND_LIMIT_MAX_FEN = 10**12  # ¥10 billion: a bound the schema can state, far above any real limit


class TeamSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField(help_text="Your role in the team.")

    class Meta:
        model = Team
        fields = ["slug", "name", "created_at", "role"]
        read_only_fields = fields

    def get_role(self, team: Team) -> str:
        return self.context["roles"].get(team.pk, "")


class TeamCreateSerializer(StrictJsonTypes, serializers.Serializer):
    name = serializers.CharField(max_length=Team._meta.get_field("name").max_length)


class MemberSerializer(serializers.ModelSerializer):
    email = serializers.EmailField(source="user.email", read_only=True)
    display_name = serializers.CharField(source="user.short_name", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "email", "display_name", "role", "spend_limit_fen", "gpu_limit", "created_at"]
        read_only_fields = fields


class MemberUpdateSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices, required=False)
    spend_limit_fen = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=SPEND_LIMIT_MAX_FEN,
        help_text=_("Monthly spend limit in fen; null lifts it."),
    )
    gpu_limit = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=10_000,
        help_text=_("GPU cards the member may hold at once; null lifts it."),
    )


class InvitationSerializer(serializers.ModelSerializer):
    invited_by = serializers.EmailField(source="invited_by.email", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Invitation
        fields = ["id", "email", "role", "status", "invited_by", "created_at", "expires_at", "decided_at"]
        read_only_fields = fields


class InvitationCreateSerializer(serializers.Serializer):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)


class TeamEventSerializer(serializers.ModelSerializer):
    actor = serializers.EmailField(source="actor.email", read_only=True, allow_null=True, default=None)

    class Meta:
        model = TeamEvent
        fields = ["id", "created_at", "actor", "action", "target", "details"]
        read_only_fields = fields


class TeamWalletSerializer(serializers.Serializer):
    cash_fen = serializers.IntegerField(help_text=_("The team's paid balance."))
    trial_fen = serializers.IntegerField(help_text=_("Trial credit (teams get none)."))
    total_fen = serializers.IntegerField()
    owed_fen = serializers.IntegerField(help_text=_("Used but not yet charged."))
    burn_fen_per_hour = serializers.IntegerField()
    runway_seconds = serializers.IntegerField(allow_null=True)


class MoneyMoveSerializer(serializers.Serializer):
    direction = serializers.ChoiceField(
        choices=[(services.MONEY_IN, "in"), (services.MONEY_OUT, "out")],
        help_text=_("in: from your paid balance into the team's (owners, admins); out: back to yours (owners)."),
    )
    amount_fen = serializers.IntegerField(min_value=1, max_value=services.MONEY_MOVE_MAX_FEN)


class MoneyMovedSerializer(serializers.Serializer):
    transaction = serializers.IntegerField(help_text=_("The ledger transaction that moved it."))
    direction = serializers.CharField()
    amount_fen = serializers.IntegerField()
    team_cash_fen = serializers.IntegerField(help_text=_("The team's paid balance after the move."))
    your_cash_fen = serializers.IntegerField(help_text=_("Your paid balance after the move."))
