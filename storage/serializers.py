"""The REST API's serializers for storage: what its endpoints take and give."""

from __future__ import annotations

from rest_framework import serializers

from core.drf import SlugRelatedField
from instances.models import Instance, Region
from storage import selectors
from storage.models import Volume, VolumeAttachment
from teams.access import request_acting


class AttachmentSerializer(serializers.ModelSerializer):
    instance = serializers.UUIDField(source="instance_id", read_only=True)
    instance_name = serializers.CharField(source="instance.name", read_only=True)
    detach_pending = serializers.SerializerMethodField()

    class Meta:
        model = VolumeAttachment
        fields = ["id", "instance", "instance_name", "mount_path", "mode", "created_at", "detach_pending"]
        read_only_fields = fields

    def get_detach_pending(self, attachment: VolumeAttachment) -> bool:
        """True while a detach waits for the instance's next stop or restart."""
        return attachment.detach_requested_at is not None


class VolumeSerializer(serializers.ModelSerializer):
    region = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    status_display = serializers.CharField(source="get_status_display", read_only=True)
    status_reason = serializers.CharField(source="status_reason_text", read_only=True)
    attachments = AttachmentSerializer(many=True, read_only=True)
    cost_per_day_fen = serializers.SerializerMethodField()
    cost_month_fen = serializers.SerializerMethodField()

    class Meta:
        model = Volume
        fields = [
            "id",
            "name",
            "region",
            "size_gb",
            "resize_to_gb",
            "status",
            "status_display",
            "status_reason",
            "used_bytes",
            "usage_checked_at",
            "cost_per_day_fen",
            "cost_month_fen",
            "attachments",
            "created_at",
            "status_changed_at",
        ]
        read_only_fields = fields

    def _cost(self, volume: Volume):
        costs = self.context.get("costs")
        if costs is None or volume.pk not in costs:
            costs = selectors.volume_costs(volumes=[volume])
        return costs[volume.pk]

    def get_cost_per_day_fen(self, volume: Volume) -> int:
        return self._cost(volume).per_day_fen

    def get_cost_month_fen(self, volume: Volume) -> int:
        """Accrued since the 1st of this month (settled or not)."""
        return self._cost(volume).month_fen


class VolumeCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    region = SlugRelatedField(slug_field="slug", queryset=Region.objects.filter(is_active=True))
    size_gb = serializers.IntegerField()


class VolumeResizeSerializer(serializers.Serializer):
    size_gb = serializers.IntegerField()


class AttachSerializer(serializers.Serializer):
    instance = serializers.PrimaryKeyRelatedField(queryset=Instance.objects.none())
    mount_path = serializers.CharField(max_length=128)
    mode = serializers.ChoiceField(choices=VolumeAttachment.Mode.choices, default=VolumeAttachment.Mode.READ_WRITE)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:  # another account's instance id is "does not exist", as any stranger's object
            self.fields["instance"].queryset = Instance.objects.filter(owner=request_acting(request)[0])
