"""The REST API's serializers for secrets: names and dates out, never a value; values in, once."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from vault.models import Secret


class SecretSerializer(serializers.ModelSerializer):
    """A secret as every answer shows it: its name, size and dates. The value is never sent back."""

    created_by = serializers.SlugRelatedField(slug_field="email", read_only=True, allow_null=True)

    class Meta:
        model = Secret
        fields = ["name", "size", "created_by", "created_at", "updated_at"]
        read_only_fields = fields


class SecretCreateSerializer(serializers.Serializer):
    # The name is checked by the service (vault.services.secret_name_check), one rule for page and API.
    name = serializers.CharField(max_length=64, trim_whitespace=False)
    value = serializers.CharField(
        max_length=settings.VAULT_VALUE_MAX_BYTES,
        trim_whitespace=False,
        write_only=True,
        style={"input_type": "password"},
    )


class SecretValueSerializer(serializers.Serializer):
    value = serializers.CharField(
        max_length=settings.VAULT_VALUE_MAX_BYTES,
        trim_whitespace=False,
        write_only=True,
        style={"input_type": "password"},
    )
