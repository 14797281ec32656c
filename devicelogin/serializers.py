"""The REST API's serializers for devicelogin: what its endpoints take and give."""

from __future__ import annotations

from rest_framework import serializers

from accounts.models import APIToken
from core.drf import StrictJsonTypes


class StartSerializer(StrictJsonTypes, serializers.Serializer):
    client_name = serializers.CharField(max_length=64, required=False, default="gpuctl", help_text="Names the token.")
    scope = serializers.ChoiceField(
        choices=APIToken.Scope.choices,
        default=APIToken.Scope.FULL,
        help_text="The token's access: full, or read (GET, HEAD and OPTIONS only).",
    )


class StartedSerializer(serializers.Serializer):
    device_code = serializers.CharField(help_text="Keep it secret; poll the token endpoint with it.")
    user_code = serializers.CharField(help_text="What the user confirms in the browser, e.g. ABCD-EFGH.")
    verification_uri = serializers.CharField()
    verification_uri_complete = serializers.CharField()
    expires_in = serializers.IntegerField()
    interval = serializers.IntegerField(help_text="Seconds between polls.")


class TokenRequestSerializer(serializers.Serializer):
    device_code = serializers.CharField(max_length=100)


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="A new API token; shown once.")
