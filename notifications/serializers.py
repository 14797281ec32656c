"""The REST API's serializers for notifications: what its endpoints take and give."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from core.drf import StrictJsonTypes, request_rule
from notifications.models import Kind, Notification, WebhookDelivery, WebhookEndpoint


class NotificationSerializer(serializers.ModelSerializer):
    kind = serializers.ChoiceField(choices=Kind.choices, read_only=True)

    class Meta:
        model = Notification
        fields = ["id", "kind", "title", "body", "link", "created_at", "read_at"]
        read_only_fields = fields


class UnreadQuerySerializer(serializers.Serializer):
    unread = serializers.BooleanField(required=False, default=False)


@request_rule(
    anyOf=[
        {"required": ["ids"], "properties": {"ids": {"minItems": 1}}},
        {"required": ["all"], "properties": {"all": {"enum": [True]}}},
    ]
)
class MarkReadSerializer(StrictJsonTypes, serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), required=False, max_length=1000
    )
    all = serializers.BooleanField(required=False, default=False)

    def validate(self, attrs):
        if not attrs.get("all") and not attrs.get("ids"):
            raise ValidationError({"ids": [_("Give ids, or all: true.")]})
        return attrs


class PreferenceSerializer(StrictJsonTypes, serializers.Serializer):
    kind = serializers.ChoiceField(choices=Kind.choices)
    label = serializers.CharField(read_only=True)
    inbox = serializers.BooleanField(read_only=True, help_text="Always true: the inbox keeps every kind.")
    email = serializers.BooleanField()
    webhook = serializers.BooleanField()


class PreferencesSerializer(serializers.Serializer):
    preferences = PreferenceSerializer(many=True)


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = [
            "event_id",
            "kind",
            "status",
            "attempts",
            "status_code",
            "error",
            "duration_ms",
            "created_at",
            "delivered_at",
        ]
        read_only_fields = fields


class WebhookEndpointSerializer(StrictJsonTypes, serializers.ModelSerializer):
    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "active", "created_at"]
        read_only_fields = ["id", "created_at"]
        extra_kwargs = {"url": {"max_length": 500}}


class WebhookEndpointCreatedSerializer(WebhookEndpointSerializer):
    secret = serializers.CharField(read_only=True, help_text="Signs every delivery. Shown this once: keep it.")

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]
