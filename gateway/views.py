"""The "Files" page of an instance: a browser for its disk. The page is a shell (breadcrumb, upload,
new folder); the folder's listing is a partial it loads with htmx, so the page itself asks no provider
and never waits on an SSH login. Changes (upload, delete, new folder) go through the files API
(``gateway.api``) from ``static/js/files.js`` with the session and its CSRF token, and the listing is
reloaded after each."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from core import files as core_files
from gateway import files
from gateway.api import MAX_DOWNLOAD
from instances.acting import acting, instance_access
from instances.models import Instance
from instances.selectors import instance_get_for
from teams.access import Access

CHUNK = core_files.CHUNK  # what the page sends per request (a module attribute: tests shrink it)


@dataclass(frozen=True)
class Row:
    entry: files.Entry
    path: str
    modified_at: datetime | None

    @property
    def downloadable(self) -> bool:
        """The API refuses downloads past ``MAX_DOWNLOAD``: those files get no link."""
        return self.entry.type == "file" and self.entry.size <= MAX_DOWNLOAD


def _unavailable(instance: Instance) -> str:
    """Why the page cannot show files, before any SSH login is tried; empty when it can try."""
    if not settings.GATEWAY_ENABLED:
        return _(
            "Files move through the SSH gateway, which is turned off on this console. "
            "Ask its operator to turn it on (GATEWAY_ENABLED)."
        )
    if instance.status != Instance.Status.RUNNING:
        return _("Files can be browsed while the instance runs; it is %(status)s now. Start it to reach its disk.") % {
            "status": instance.get_status_display().lower()
        }
    return ""


def _clean(path: str) -> str:
    """An absolute, normalised path, or "" for the login's home folder."""
    path = (path or "").strip()
    if not path or "\x00" in path:
        return ""
    return posixpath.normpath(posixpath.join("/", path))


@login_required
@require_GET
def instance_files(request: HttpRequest, pk) -> HttpResponse:
    principal, _membership = acting(request)
    instance = instance_get_for(user=principal, instance_id=pk)
    access = instance_access(request, instance)
    if access == Access.NONE:
        raise Http404
    if access != Access.OPERATE:  # another member's instance in the team: its files are theirs
        message = _(
            "This instance was launched by another member of the team: only they and the team's admins may use its files."
        )
        return render(request, "instances/forbidden.html", {"message": message}, status=403)
    unavailable = _unavailable(instance)
    path = _clean(request.GET.get("path", ""))
    if request.GET.get("partial") == "listing":
        return _listing(request, instance, path=path, unavailable=unavailable)
    api = reverse("api-instance-files", args=[instance.pk])
    context = {
        "instance": instance,
        "unavailable": unavailable,
        "path": path,
        "chunk": CHUNK,
        "strings": core_files.browser_strings(),
        "can_change": True,
        "listing_url": reverse("instance_files", args=[instance.pk]),
        "api": {
            "files": api,
            "stat": reverse("api-instance-file-stat", args=[instance.pk]),
            "folder": reverse("api-instance-folder", args=[instance.pk]),
            "content": reverse("api-instance-file-content", args=[instance.pk]),
        },
    }
    return render(request, "gateway/files.html", context)


def _listing(request: HttpRequest, instance: Instance, *, path: str, unavailable: str) -> HttpResponse:
    context = {
        "instance": instance,
        "error": unavailable,
        "path": path,
        "rows": [],
        "crumbs": core_files.crumbs(path or "/"),
        "can_change": True,
        "listing_url": reverse("instance_files", args=[instance.pk]),
        "download_url": reverse("api-instance-file-content", args=[instance.pk]),
    }
    if not unavailable:
        try:
            where, entries = files.folder_open(instance=instance, path=path)
        except files.FilesRefused as exc:
            context["error"] = exc.message
        else:
            context["path"], context["crumbs"] = where, core_files.crumbs(where)
            context["rows"] = [
                Row(
                    entry=e,
                    path=posixpath.join(where, e.name),
                    modified_at=datetime.fromtimestamp(e.modified, tz=UTC) if e.modified else None,
                )
                for e in entries
            ]
    return render(request, "files/_listing.html", context)
