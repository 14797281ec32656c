"""The REST API for an instance's files (``gateway.files``): list, stat, download, upload in resumable
chunks, delete, make a folder. Another user's instance is a 404; a refusal is a 4xx in the API's one
error format. The instance is looked up in the acting context: a token scoped to a team reaches the
team's instances, not its maker's own.

Uploading a large file: ``PUT …/files/content/?path=/root/data.bin&offset=0`` with the first chunk as the
body, then each next chunk at the size the previous answer returned. After a dropped connection,
``GET …/files/stat/?path=…`` says how many bytes arrived: resume there.
"""

from __future__ import annotations

import posixpath

from django.http import FileResponse, Http404
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.files import EntrySerializer, RawBody, Refused, query_path
from core.files import call as _call
from gateway import files
from instances.acting import acting, instance_access
from instances.models import Instance
from instances.selectors import instance_get_for
from teams.access import Access

MAX_DOWNLOAD = 512 * 1024 * 1024  # larger files go over scp or sftp through the gateway
PATH = OpenApiParameter(
    "path", {"type": "string", "minLength": 1}, required=True, description="A path on the instance, e.g. /root/runs"
)


def _instance(request, instance_id) -> Instance:
    """The instance, if it is the acting principal's and the person may operate it; any other is a 404.

    Looked up in the request's acting context (``instances.acting``), as the instances API does, not by
    the person alone: a token scoped to a team reaches the team's instances and never its maker's
    personal ones (where a team's CI could plant an ``authorized_keys``), a personal token never the
    team's. The membership is read again on every call, so a former member is refused at once."""
    principal, _membership = acting(request)
    instance = instance_get_for(user=principal, instance_id=instance_id)
    access = instance_access(request, instance)
    if access == Access.NONE:
        raise Http404
    if access != Access.OPERATE:
        raise Refused(
            files.FilesRefused(
                _(
                    "This instance was launched by another member of the team: only they and the team's admins may use its files."
                ),
                code="forbidden",
                status=403,
            )
        )
    return instance


class FilesView(APIView):
    @extend_schema(parameters=[PATH], responses=EntrySerializer(many=True), summary="List a folder")
    def get(self, request, instance_id):
        entries = _call(files.files_list, instance=_instance(request, instance_id), path=query_path(request))
        return Response(EntrySerializer(entries, many=True).data)

    @extend_schema(parameters=[PATH], responses={204: None}, summary="Delete a file or an empty folder")
    def delete(self, request, instance_id):
        _call(files.file_delete, instance=_instance(request, instance_id), path=query_path(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class FileStatView(APIView):
    @extend_schema(parameters=[PATH], responses=EntrySerializer, summary="A file's size (where to resume)")
    def get(self, request, instance_id):
        entry = _call(files.file_stat, instance=_instance(request, instance_id), path=query_path(request))
        return Response(EntrySerializer(entry).data)


class FolderView(APIView):
    @extend_schema(parameters=[PATH], request=None, responses={201: None}, summary="Make a folder (and its parents)")
    def post(self, request, instance_id):
        _call(files.folder_make, instance=_instance(request, instance_id), path=query_path(request))
        return Response(status=status.HTTP_201_CREATED)


class FileContentView(APIView):
    parser_classes = [RawBody]

    @extend_schema(
        parameters=[PATH], responses={(200, "application/octet-stream"): OpenApiTypes.BINARY}, summary="Download a file"
    )
    def get(self, request, instance_id):
        instance, path = _instance(request, instance_id), query_path(request)
        entry = _call(files.file_stat, instance=instance, path=path)
        if entry.type != "file":
            raise Refused(files.FilesRefused(_("Only a file can be downloaded."), code="invalid", status=400))
        if entry.size > MAX_DOWNLOAD:
            raise Refused(
                files.FilesRefused(
                    _("Files this large download over scp or sftp through the SSH gateway."),
                    code="too_large",
                    status=413,
                )
            )
        # Streamed from a temporary file (FileResponse closes it), read up to the cap and no further.
        spool = _call(files.file_read, instance=instance, path=path, cap=MAX_DOWNLOAD)
        name = posixpath.basename(path).replace('"', "")
        return FileResponse(spool, as_attachment=True, filename=name, content_type="application/octet-stream")

    @extend_schema(
        parameters=[
            PATH,
            OpenApiParameter("offset", OpenApiTypes.INT, description="Where this chunk goes; 0 starts afresh"),
        ],
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses=EntrySerializer,
        summary="Upload a chunk of a file",
    )
    def put(self, request, instance_id):
        instance, path = _instance(request, instance_id), query_path(request)
        try:
            offset = int(request.query_params.get("offset", "0"))
        except ValueError:
            raise Refused(
                files.FilesRefused(_("The offset is a number of bytes."), code="invalid", status=400)
            ) from None
        data = request.stream.read(files.MAX_CHUNK + 1) if request.stream is not None else b""
        size = _call(files.file_write, instance=instance, path=path, offset=offset, data=data)
        return Response({"name": posixpath.basename(path), "type": "file", "size": size, "modified": 0})
