"""What the two file browsers share (an instance's disk in ``gateway.files``, a volume in
``storage.files``): one entry shape, one refusal, one chunk protocol in the API, the strings
``static/js/files.js`` shows and the breadcrumb.

The chunk protocol: ``PUT …/files/content/?path=…&offset=N`` writes one chunk (``MAX_CHUNK`` at most)
at byte ``N`` (0 starts the file afresh; past the end is refused with ``offset_mismatch``, so no hole is
left); after a dropped connection ``GET …/files/stat/?path=…`` says how many bytes arrived, and the
client continues from there.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.parsers import BaseParser

MAX_CHUNK = 64 * 1024 * 1024  # one upload request's body at most
CHUNK = 8 * 1024 * 1024  # what the page sends per request: small enough to resume cheaply, large enough to be quick


class FilesRefused(Exception):
    """Why files cannot be reached or changed; the message is shown as it is."""

    def __init__(self, message: str, *, code: str = "invalid", status: int = 409) -> None:
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


@dataclass(frozen=True)
class Entry:
    name: str
    type: str  # "file", "dir", "link" or "other"
    size: int
    modified: int  # seconds since the epoch


# --- The API's side ------------------------------------------------------------------------------------


class Refused(APIException):
    """A ``FilesRefused`` in the API's one error format, with its own status."""

    def __init__(self, exc: FilesRefused) -> None:
        super().__init__(detail=exc.message, code=exc.code)
        self.status_code = exc.status


def refused(message: str, *, code: str = "invalid", status: int = 400) -> Refused:
    return Refused(FilesRefused(message, code=code, status=status))


class RawBody(BaseParser):
    """An upload's body is the chunk's bytes, read by the view itself."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream


class EntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=["file", "dir", "link", "other"])
    size = serializers.IntegerField()
    modified = serializers.IntegerField(help_text="Seconds since the epoch.")


def query_path(request) -> str:
    """The ``path`` query parameter, or a 400 saying it is missing."""
    path = (request.query_params.get("path") or "").strip()
    if not path or "\x00" in path:
        raise refused(_("Give a path."))
    return path


def query_offset(request) -> int:
    """The ``offset`` query parameter (0 when absent), or a 400 saying what it should be."""
    raw = request.query_params.get("offset", "0")
    if not raw.isascii() or not raw.isdigit():
        raise refused(_("The offset is a number of bytes."))
    return int(raw)


def call(function, **kwargs):
    """Run a files function, turning its refusal into the API's error."""
    try:
        return function(**kwargs)
    except FilesRefused as exc:
        raise Refused(exc) from exc


# --- The pages' side -----------------------------------------------------------------------------------


def crumbs(path: str) -> list[tuple[str, str]]:
    """(name, path) of each folder from the root down to ``path``."""
    out, here = [("/", "/")], "/"
    for part in [p for p in path.split("/") if p]:
        here = posixpath.join(here, part)
        out.append((part, here))
    return out


def browser_strings() -> dict[str, str]:
    """What files.js says, translated here (the page loads no JavaScript catalogue)."""
    return {
        "confirm_delete": _("Delete %(name)s? This cannot be undone."),
        "confirm_replace": _("%(name)s is already here. Replace it?"),
        "folder_name": _("Name of the new folder"),
        "uploading": _("Uploading %(name)s: %(done)s of %(total)s"),
        "resuming": _("The connection dropped; resuming %(name)s at %(done)s…"),
        "resumed": _("Resuming %(name)s where the last upload stopped (%(done)s)."),
        "uploaded": _("Uploaded %(name)s."),
        "failed": _("The upload of %(name)s stopped: %(error)s"),
        "network": _("the connection to the console was lost"),
        "error": _("Something went wrong (%(status)s)."),
    }
