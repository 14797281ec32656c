"""The REST API for volumes and their attachments. Same services, same errors as the pages.

A field problem is a 400 with ``fields``; a refusal is a 409 whose ``code`` says which
(``invalid_state``, ``attachment_conflict``, ``quota_exceeded``, ``insufficient_funds``). Creating,
resizing and deleting finish in a worker: the answer shows the volume in its busy state.

In the acting context, as the pages (``storage.views``): a role that may not create, or a volume this
person may see but not change, is a 403 with ``code: permission_denied`` and a message saying why.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from core.drf import ServiceError, SlugRelatedField
from idempotency.decorators import IDEMPOTENCY_KEY_PARAMETER, idempotent
from instances.errors import InstanceError, LaunchInvalid, NotPermitted
from instances.models import Instance, Region
from storage import selectors, services
from storage.models import Volume, VolumeAttachment
from teams.access import Access, principal_access, request_acting, require_access, require_permission
from teams.roles import Permission


def _raise(exc: InstanceError):
    if isinstance(exc, NotPermitted):
        raise PermissionDenied(detail=exc.message, code=exc.code) from exc
    if isinstance(exc, LaunchInvalid):
        raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc
    raise ServiceError(detail=exc.message, code=exc.code) from exc


# --- Serializers ----------------------------------------------------------------------------------------


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


# --- Views ----------------------------------------------------------------------------------------------


def _require_instance(request, instance: Instance) -> None:
    """A 403 unless this person operates ``instance`` (its creator, or a team admin)."""
    require_access(
        request,
        owner_id=instance.owner_id,
        created_by_id=instance.created_by_id,
        operate=True,
        message=_("Only the instance's creator or a team admin can attach volumes to it or detach them."),
    )


_refused = OpenApiResponse(description="invalid_state, attachment_conflict, quota_exceeded or insufficient_funds")


@extend_schema_view(
    list=extend_schema(summary="List your volumes", tags=["storage"]),
    retrieve=extend_schema(summary="Get one volume", tags=["storage"]),
    create=extend_schema(
        summary="Create a volume",
        tags=["storage"],
        request=VolumeCreateSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: VolumeSerializer, 400: OpenApiResponse(description="Invalid choice"), 409: _refused},
    ),
    destroy=extend_schema(
        summary="Delete a volume and its files",
        tags=["storage"],
        responses={202: VolumeSerializer, 409: OpenApiResponse(description="Attached, or not in a deletable state")},
    ),
)
class VolumeViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = VolumeSerializer
    lookup_value_converter = "uuid"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return Volume.objects.none()
        require_permission(
            self.request, Permission.RESOURCES_VIEW, _("Your role in this team does not show its resources.")
        )
        return selectors.volume_list_for(user=request_acting(self.request)[0])

    def get_object(self, *, operate: bool = False) -> Volume:
        """The volume (404 for another account's, or a role that sees no resources); 403 when ``operate``
        is asked of a person who may only see it."""
        volume = super().get_object()
        require_access(
            self.request,
            owner_id=volume.owner_id,
            created_by_id=volume.created_by_id,
            operate=operate,
            message=_("Only the volume's creator or a team admin can change it."),
        )
        return volume

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        costs = selectors.volume_costs(volumes=page)
        data = VolumeSerializer(page, many=True, context={**self.get_serializer_context(), "costs": costs}).data
        return self.get_paginated_response(data)

    def _answer(self, volume: Volume, code: int = status.HTTP_200_OK) -> Response:
        volume = selectors.volume_get_for(user=request_acting(self.request)[0], volume_id=volume.pk)
        return Response(VolumeSerializer(volume, context=self.get_serializer_context()).data, status=code)

    @idempotent
    def create(self, request, *args, **kwargs):
        require_permission(
            request,
            Permission.RESOURCES_LAUNCH,
            _("Your role in this team does not allow creating volumes or attaching them."),
        )
        body = VolumeCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            volume = services.volume_create(user=request_acting(request)[0], actor=request.user, **body.validated_data)
        except InstanceError as exc:
            _raise(exc)
        return self._answer(volume, status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        volume = self.get_object(operate=True)
        try:
            volume = services.volume_delete(volume=volume, actor=request.user)
        except InstanceError as exc:
            _raise(exc)
        return self._answer(volume, status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Grow a volume (never shrink)",
        tags=["storage"],
        request=VolumeResizeSerializer,
        responses={200: VolumeSerializer, 400: OpenApiResponse(description="Not larger"), 409: _refused},
    )
    @action(detail=True, methods=["post"])
    def resize(self, request, pk=None):
        volume = self.get_object(operate=True)
        body = VolumeResizeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            volume = services.volume_resize(volume=volume, size_gb=body.validated_data["size_gb"])
        except InstanceError as exc:
            _raise(exc)
        return self._answer(volume)

    @extend_schema(
        methods=["GET"], summary="The volume's attachments", tags=["storage"], responses=AttachmentSerializer(many=True)
    )
    @extend_schema(
        methods=["POST"],
        summary="Attach to one of your instances (mounted at its next start or restart)",
        tags=["storage"],
        request=AttachSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: AttachmentSerializer, 400: OpenApiResponse(description="Invalid choice"), 409: _refused},
    )
    @action(detail=True, methods=["get", "post"])
    @idempotent
    def attachments(self, request, pk=None):
        volume = self.get_object()
        if request.method == "GET":
            return Response(AttachmentSerializer(volume.attachments.all(), many=True).data)
        require_permission(
            request,
            Permission.RESOURCES_LAUNCH,
            _("Your role in this team does not allow creating volumes or attaching them."),
        )
        body = AttachSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        _require_instance(request, data["instance"])
        try:
            attachment = services.volume_attach(
                user=request_acting(request)[0],
                volume=volume,
                instance=data["instance"],
                mount_path=data["mount_path"],
                mode=data["mode"],
                actor=request.user,
            )
        except InstanceError as exc:
            _raise(exc)
        return Response(AttachmentSerializer(attachment).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Detach (at once from a stopped instance; at the next stop or restart from a running one)",
        tags=["storage"],
        request=None,
        responses={
            200: OpenApiResponse(AttachmentSerializer, description="Detach pending"),
            204: OpenApiResponse(description="Detached"),
        },
    )
    @action(detail=True, methods=["delete"], url_path=r"attachments/(?P<attachment_id>\d+)")
    def detach(self, request, pk=None, attachment_id=None):
        volume = self.get_object()
        attachment = selectors.attachment_get_for(
            user=request_acting(request)[0], volume=volume, attachment_id=attachment_id
        )
        # The volume's operator, or the instance's (a member takes a team volume off their own instance).
        if principal_access(request, owner_id=volume.owner_id, created_by_id=volume.created_by_id) < Access.OPERATE:
            _require_instance(request, attachment.instance)
        pending = services.volume_detach(attachment=attachment)
        if pending is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(AttachmentSerializer(pending).data)
