"""The REST API's serializers for ports: what its endpoints take and give."""

from __future__ import annotations

from rest_framework import serializers

from ports.models import MAX_PORT, InstancePort, PortShare


class ShareSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    status = serializers.CharField(source="status_now", read_only=True)

    class Meta:
        model = PortShare
        fields = ["id", "label", "url", "status", "created_at", "expires_at", "revoked_at"]
        read_only_fields = fields

    def get_url(self, share: PortShare) -> str | None:
        """The link itself, a secret: null for a team member who may see the instance but not change it."""
        return share.url if self.context.get("can_operate", True) else None


class PortSerializer(serializers.ModelSerializer):
    url = serializers.CharField(read_only=True)
    shares = ShareSerializer(many=True, read_only=True)

    class Meta:
        model = InstancePort
        fields = ["id", "port", "name", "url", "shares", "created_at"]
        read_only_fields = fields


class PortCreateSerializer(serializers.Serializer):
    port = serializers.IntegerField(min_value=1, max_value=MAX_PORT)
    name = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")


class ShareCreateSerializer(serializers.Serializer):
    label = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
