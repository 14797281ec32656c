"""The REST API for a volume's files (``storage.files``), beside the volumes' own (``storage.api``), in
the instance files API's shapes (``core.files``): list, stat, download, upload in resumable chunks,
delete, make a folder. Paths are volume paths: ``/`` is the volume's root.

Uploading a large file: ``PUT /api/v1/volumes/<id>/files/content/?path=/data.bin&offset=0`` with the
first chunk as the body, then each next chunk at the size the previous answer returned. After a
dropped connection, ``GET …/files/stat/?path=/data.bin`` says how many bytes arrived: resume there. A
chunk that would take the volume past its size is a 413 ``volume_full``, refused before it is written.

Who: the volume's account (``teams.access``), checked on every call; anyone else gets a 404. Reading
(list, stat, download) needs to see the volume; changing its files needs to operate it (its creator or
a team admin), else a 403.
"""

from __future__ import annotations

from django.http import FileResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.files import MAX_CHUNK, EntrySerializer, RawBody, call, query_offset, query_path, refused
from storage import files, selectors
from storage.models import Volume
from teams.access import request_acting, require_access, require_permission
from teams.roles import Permission

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
