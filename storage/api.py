"""The REST API for volumes and their attachments. Same services, same errors as the pages.

A field problem is a 400 with ``fields``; a refusal is a 409 whose ``code`` says which
(``invalid_state``, ``attachment_conflict``, ``quota_exceeded``, ``insufficient_funds``). Creating,
resizing and deleting finish in a worker: the answer shows the volume in its busy state.

In the acting context, as the pages (``storage.views``): a role that may not create, or a volume this
person may see but not change, is a 403 with ``code: permission_denied`` and a message saying why.

A volume's files (``storage.files``), in the instance files API's shapes (``core.files``): list, stat,
download, upload in resumable chunks, delete, make a folder. Paths are volume paths: ``/`` is the
volume's root. Uploading a large file: ``PUT /api/v1/volumes/<id>/files/content/?path=/data.bin&offset=0``
with the first chunk as the body, then each next chunk at the size the previous answer returned. After
a dropped connection, ``GET …/files/stat/?path=/data.bin`` says how many bytes arrived: resume there. A
chunk that would take the volume past its size is a 413 ``volume_full``, refused before it is written.
Reading (list, stat, download) needs to see the volume; changing its files needs to operate it (its
creator or a team admin), else a 403; anyone else gets a 404, checked on every call.
"""

from __future__ import annotations

from django.http import FileResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core.drf import ServiceError
from core.files import MAX_CHUNK, EntrySerializer, RawBody, call, query_offset, query_path, refused
from idempotency.decorators import IDEMPOTENCY_KEY_PARAMETER, idempotent
from instances.errors import InstanceError, LaunchInvalid, NotPermitted
from instances.models import Instance
from storage import files, selectors, services
from storage.models import Volume
from storage.serializers import (
    AttachmentSerializer,
    AttachSerializer,
    VolumeCreateSerializer,
    VolumeResizeSerializer,
    VolumeSerializer,
)
from teams.access import Access, principal_access, request_acting, require_access, require_permission
from teams.resource_api import TeamResourceViewSet, resource_schema
from teams.roles import Permission


def _raise(exc: InstanceError):
    if isinstance(exc, NotPermitted):
        raise PermissionDenied(detail=exc.message, code=exc.code) from exc
    if isinstance(exc, LaunchInvalid):
        raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc
    raise ServiceError(detail=exc.message, code=exc.code) from exc


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


@resource_schema(
    tag="storage",
    noun="volume",
    nouns="volumes",
    create={
        "summary": "Create a volume",
        "request": VolumeCreateSerializer,
        "responses": {201: VolumeSerializer, 400: OpenApiResponse(description="Invalid choice"), 409: _refused},
    },
    destroy={
        "summary": "Delete a volume and its files",
        "responses": {202: VolumeSerializer, 409: OpenApiResponse(description="Attached, or not in a deletable state")},
    },
)
class VolumeViewSet(mixins.DestroyModelMixin, TeamResourceViewSet):
    serializer_class = VolumeSerializer
    change_refused = gettext_lazy("Only the volume's creator or a team admin can change it.")

    def resources_for(self, principal):
        return selectors.volume_list_for(user=principal)

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


PATH = OpenApiParameter(
    "path",
    {"type": "string", "minLength": 1},
    required=True,
    description="A path in the volume, e.g. /runs (/ is its root)",
)


DOWNLOAD_BLOCK = 1024 * 1024  # what a download streams at a time


def _volume(request, volume_id, *, change: bool = False) -> Volume:
    """The acting account's volume (404 for anyone else's); 403 when ``change`` is asked of a person who
    may only see it."""
    require_permission(request, Permission.RESOURCES_VIEW, _("Your role in this team does not show its resources."))
    volume = selectors.volume_get_for(user=request_acting(request)[0], volume_id=volume_id)
    require_access(
        request,
        owner_id=volume.owner_id,
        created_by_id=volume.created_by_id,
        operate=change,
        message=_("Only the volume's creator or a team admin can change its files."),
    )
    return volume


_TAGS = ["storage"]


_refusals = {
    400: OpenApiResponse(
        description="invalid_path (e.g. ..), link (a symbolic link is not followed), not_a_file (a FIFO, a device)"
    ),
    404: OpenApiResponse(description="No such volume, file or folder"),
    409: OpenApiResponse(description="invalid_state, unavailable (files not on the console's host)"),
    504: OpenApiResponse(description="timeout (more than STORAGE_FILES_DEADLINE_S going through the volume)"),
}


class VolumeFilesView(APIView):
    @extend_schema(
        parameters=[PATH],
        responses={200: EntrySerializer(many=True), **_refusals},
        summary="List a folder of a volume",
        tags=_TAGS,
    )
    def get(self, request, volume_id):
        _where, entries = call(files.volume_files_list, volume=_volume(request, volume_id), path=query_path(request))
        return Response(EntrySerializer(entries, many=True).data)

    @extend_schema(
        parameters=[PATH],
        responses={204: None, **_refusals},
        summary="Delete a file, a link or an empty folder of a volume",
        tags=_TAGS,
    )
    def delete(self, request, volume_id):
        call(files.volume_file_delete, volume=_volume(request, volume_id, change=True), path=query_path(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class VolumeFileStatView(APIView):
    @extend_schema(
        parameters=[PATH],
        responses={200: EntrySerializer, **_refusals},
        summary="A file's size on a volume (where to resume)",
        tags=_TAGS,
    )
    def get(self, request, volume_id):
        entry = call(files.volume_file_stat, volume=_volume(request, volume_id), path=query_path(request))
        return Response(EntrySerializer(entry).data)


class VolumeFolderView(APIView):
    @extend_schema(
        parameters=[PATH],
        request=None,
        responses={201: None, **_refusals},
        summary="Make a folder (and its parents) on a volume",
        tags=_TAGS,
    )
    def post(self, request, volume_id):
        call(files.volume_folder_make, volume=_volume(request, volume_id, change=True), path=query_path(request))
        return Response(status=status.HTTP_201_CREATED)


class VolumeFileContentView(APIView):
    parser_classes = [RawBody]

    @extend_schema(
        parameters=[PATH],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            413: OpenApiResponse(description="too_large (a file larger than the volume: a sparse file)"),
            **_refusals,
        },
        summary="Download a file of a volume (streamed)",
        tags=_TAGS,
    )
    def get(self, request, volume_id):
        handle, entry = call(files.volume_file_open, volume=_volume(request, volume_id), path=query_path(request))
        # Streamed off the request's lane (console.handlers), and no further than the file's size at open.
        response = FileResponse(handle, as_attachment=True, filename=entry.name)
        response["Content-Length"] = str(entry.size)
        response.block_size = DOWNLOAD_BLOCK
        return response

    @extend_schema(
        parameters=[
            PATH,
            OpenApiParameter("offset", OpenApiTypes.INT, description="Where this chunk goes; 0 starts afresh"),
        ],
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={
            200: EntrySerializer,
            413: OpenApiResponse(description="volume_full (past the volume's size), too_large (a chunk over 64 MB)"),
            **_refusals,
        },
        summary="Upload a chunk of a file to a volume",
        tags=_TAGS,
    )
    def put(self, request, volume_id):
        volume, path = _volume(request, volume_id, change=True), query_path(request)
        offset = query_offset(request)
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared.isascii() and declared.isdigit():
            length = int(declared)
            if length > MAX_CHUNK:
                raise refused(
                    _("Send at most %(mb)d MB per chunk.") % {"mb": MAX_CHUNK // 2**20}, code="too_large", status=413
                )
            body = files.body_pieces(request.stream, length=length) if request.stream is not None else iter(())
        else:  # no length said (chunked transfer): read the chunk first, to check it before writing
            data = request.stream.read(MAX_CHUNK + 1) if request.stream is not None else b""
            length, body = len(data), iter((data,))
        size = call(files.volume_file_write, volume=volume, path=path, offset=offset, length=length, body=body)
        name = files.volume_path_clean(path)[-1]
        return Response({"name": name, "type": "file", "size": size, "modified": 0})
