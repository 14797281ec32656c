"""The REST API's serializers for accounts: what its endpoints take and give."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from accounts.models import APIToken, SecurityEvent, SSHKey, User
from core.drf import StrictJsonTypes


class ProfileSerializer(StrictJsonTypes, serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["email", "display_name", "language", "date_joined"]
        read_only_fields = ["email", "date_joined"]


class SSHKeySerializer(serializers.ModelSerializer):
    class Meta:
        model = SSHKey
        fields = ["id", "name", "key_type", "bits", "fingerprint", "public_key", "created_at"]
        read_only_fields = fields


class SSHKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        required=False, allow_blank=True, max_length=64, help_text=_("Defaults to the key's comment.")
    )
    public_key = serializers.CharField(
        max_length=20_000, trim_whitespace=True, help_text=_("One OpenSSH public key line.")
    )


class SSHKeyUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)


class APITokenSerializer(serializers.ModelSerializer):
    status = serializers.SerializerMethodField()
    team = serializers.SlugField(
        source="team.slug",
        read_only=True,
        allow_null=True,
        default=None,
        help_text=_("The team it acts in; null: personal."),
    )

    class Meta:
        model = APIToken
        fields = [
            "id",
            "name",
            "prefix",
            "scope",
            "team",
            "created_at",
            "expires_at",
            "last_used_at",
            "revoked_at",
            "status",
            "rate_per_min",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "rate_per_min": {"help_text": _("Requests a minute of its own, within the account's; null: the account's.")}
        }

    def get_status(self, token: APIToken) -> str:
        return token.status().value


class APITokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=365,
        help_text=_("Days until the token stops working; omit or null for a token that never expires."),
    )
    scope = serializers.ChoiceField(
        choices=APIToken.Scope.choices,
        default=APIToken.Scope.FULL,
        help_text=_("full: everything you can do; read: GET, HEAD and OPTIONS only (it cannot launch, stop or spend)."),
    )
    team = serializers.SlugField(
        required=False,
        allow_null=True,
        max_length=64,
        help_text=_("The slug of one of your teams: the token acts in that team. Omit or null for a personal token."),
    )
    rate_per_min = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=1_000_000,
        help_text=_(
            "Requests a minute for this token, within your account's limit (GET /api/v1/account/rate-limit/): "
            "a larger number is stored as the account's. Omit or null: the account's limit."
        ),
    )


class APITokenCreatedSerializer(APITokenSerializer):
    token = serializers.CharField(help_text=_("The raw token. It is returned only in this response; store it now."))

    class Meta(APITokenSerializer.Meta):
        fields = [*APITokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class SecurityEventSerializer(serializers.ModelSerializer):
    action_label = serializers.CharField(
        source="get_action_display", read_only=True, help_text=_("The action, in your language.")
    )
    device = serializers.CharField(
        read_only=True, help_text=_("The browser or program and its system, e.g. Firefox on Linux.")
    )

    class Meta:
        model = SecurityEvent
        fields = ["id", "action", "action_label", "created_at", "ip", "user_agent", "device", "details"]
        read_only_fields = fields


class RateLimitSerializer(serializers.Serializer):
    window_s = serializers.IntegerField(help_text=_("The window the limits count in, in seconds (a sliding minute)."))
    account_per_min = serializers.IntegerField(
        help_text=_("Requests a minute for all of the account's sessions and tokens together.")
    )
    account_remaining = serializers.IntegerField(help_text=_("What the account may still send in the window."))
    token_per_min = serializers.IntegerField(
        allow_null=True, help_text=_("This token's own limit, within the account's; null: none of its own.")
    )
    token_remaining = serializers.IntegerField(allow_null=True, help_text=_("What this token may still send."))
