"""The REST API's serializers for secrets: names and dates out, never a value; values in, once."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from core.drf import StrictJsonTypes
from vault.models import NAME_PATTERN, NAME_RULE, RegistryCredential, Secret


class SecretSerializer(serializers.ModelSerializer):
    """A secret as every answer shows it: its name, size and dates. The value is never sent back."""

    created_by = serializers.SlugRelatedField(slug_field="email", read_only=True, allow_null=True)

    class Meta:
        model = Secret
        fields = ["name", "size", "created_by", "created_at", "updated_at"]
        read_only_fields = fields


class SecretCreateSerializer(StrictJsonTypes, serializers.Serializer):
    # The pattern here so the schema states it; the service checks it again, and the reserved names.
    name = serializers.RegexField(
        NAME_PATTERN,
        max_length=64,
        trim_whitespace=False,
        error_messages={"invalid": NAME_RULE},
        help_text="An environment variable's name; PATH, HOME, LD_*, CONSOLE_* and a few others are reserved.",
    )
    value = serializers.CharField(
        max_length=settings.VAULT_VALUE_MAX_BYTES,
        trim_whitespace=False,
        write_only=True,
        style={"input_type": "password"},
    )


class SecretValueSerializer(StrictJsonTypes, serializers.Serializer):
    value = serializers.CharField(
        max_length=settings.VAULT_VALUE_MAX_BYTES,
        trim_whitespace=False,
        write_only=True,
        style={"input_type": "password"},
    )


class RegistryCredentialSerializer(serializers.ModelSerializer):
    """A registry credential as every answer shows it: host and user name, never the password."""

    created_by = serializers.SlugRelatedField(slug_field="email", read_only=True, allow_null=True)

    class Meta:
        model = RegistryCredential
        fields = ["id", "host", "username", "created_by", "created_at", "updated_at"]
        read_only_fields = fields


class RegistryCredentialCreateSerializer(StrictJsonTypes, serializers.Serializer):
    host = serializers.CharField(max_length=255, help_text="The registry's host, with its port if it has one.")
    username = serializers.CharField(max_length=255)
    password = serializers.CharField(
        max_length=8192, trim_whitespace=False, write_only=True, style={"input_type": "password"}
    )


class RegistryCredentialUpdateSerializer(StrictJsonTypes, serializers.Serializer):
    username = serializers.CharField(max_length=255)
    password = serializers.CharField(
        max_length=8192, trim_whitespace=False, write_only=True, style={"input_type": "password"}
    )
