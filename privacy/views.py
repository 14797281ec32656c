"""Privacy's pages: the legal texts and their acceptance, "Your data" (export and deletion), and staff's
pages (deletion requests; drafting and publishing the texts). Thin: the rules are in services."""

from __future__ import annotations

from allauth.account.decorators import reauthentication_required
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.client import request_client
from core.views import staff_only
from privacy import selectors, services
from privacy.errors import PrivacyError
from privacy.forms import AcceptForm, DeletionRequestForm, DocumentDraftForm
from privacy.middleware import accepted_mark
from privacy.models import DataExport, DeletionRequest, DocumentKind, DocumentVersion


def document(request: HttpRequest, kind: str) -> HttpResponse:
    """A legal text, public: the version in force, or an earlier published one (``?version=N``)."""
    if kind not in DocumentKind.values:
        raise Http404
    versions = DocumentVersion.objects.filter(kind=kind, published_at__isnull=False)
    wanted = request.GET.get("version", "")
    if wanted.isdigit():
        version = get_object_or_404(versions, version=int(wanted))
    else:
        version = versions.order_by("-version").first()
        if version is None:
            raise Http404
    return render(
        request,
        "privacy/document.html",
        {"document": version, "history": versions.order_by("-version").values_list("version", "published_at")},
    )


def _safe_next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return ""


@login_required
def accept(request: HttpRequest) -> HttpResponse:
    """Accept the versions in force that the person has not yet (the middleware sends them here)."""
    pending = selectors.documents_pending_for(user=request.user)
    following = _safe_next(request)
    if not pending:
        accepted_mark(request, selectors.documents_in_force_ids())
        return redirect(following or "dashboard")
    form = AcceptForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        # Exactly what was pending when the page was sent: a version published in between is asked next.
        shown = {int(pk) for pk in request.POST.getlist("version") if pk.isdigit()}
        services.documents_accept(
            user=request.user, versions=[v for v in pending if v.pk in shown], ip=request_client(request)["ip"]
        )
        if not selectors.documents_pending_for(user=request.user):
            accepted_mark(request, selectors.documents_in_force_ids())
            messages.success(request, _("Thank you: you have accepted the current terms."))
            return redirect(following or "dashboard")
        return redirect(request.get_full_path())
    return render(request, "privacy/accept.html", {"pending": pending, "form": form, "next": following})


def _data_context(request: HttpRequest) -> dict:
    exports = list(selectors.exports_for(user=request.user)[:5])
    return {
        "exports": exports,
        "export_active": any(e.status in DataExport.ACTIVE for e in exports),
        "deletion": selectors.deletion_open_for(user=request.user),
        "now": timezone.now(),
        "grace_days": settings.PRIVACY_DELETION_GRACE_DAYS,
    }


@login_required
def data(request: HttpRequest) -> HttpResponse:
    """Your data: export it, or delete the account. The export list is also an htmx partial it polls."""
    context = _data_context(request)
    if getattr(request, "htmx", False) and request.GET.get("part") == "exports":
        return render(request, "privacy/_exports.html", context)
    return render(request, "privacy/data.html", context)


@login_required
@require_POST
def export_request(request: HttpRequest) -> HttpResponse:
    try:
        services.data_export_request(user=request.user)
        messages.success(request, _("Your export is being prepared: this page shows it when it is ready."))
    except PrivacyError as exc:
        messages.error(request, exc.message)
    return redirect("privacy_data")


@login_required
def export_download(request: HttpRequest, export_id: int) -> HttpResponse:
    """The ZIP, to its own user only, while ready and unexpired (another's, or an expired one: 404)."""
    export = get_object_or_404(DataExport, pk=export_id, user=request.user, status=DataExport.Status.READY)
    if export.expires_at is None or export.expires_at <= timezone.now() or export.content is None:
        raise Http404
    response = HttpResponse(bytes(export.content), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@login_required
@reauthentication_required
def deletion_request(request: HttpRequest) -> HttpResponse:
    """Confirm and schedule the deletion. allauth asks for the password (or a second factor) again first,
    and again after a few minutes, so a session left open cannot delete the account."""
    if selectors.deletion_open_for(user=request.user) is not None:
        return redirect("privacy_data")
    form = DeletionRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            scheduled = services.deletion_request(user=request.user)
        except PrivacyError as exc:
            form.add_error(None, exc.message)
        else:
            messages.warning(
                request,
                _("Your account will be deleted on %(date)s. You can cancel until then on this page.")
                % {"date": timezone.localtime(scheduled.due_at).strftime("%Y-%m-%d %H:%M")},
            )
            return redirect("privacy_data")
    return render(
        request,
        "privacy/deletion.html",
        {"form": form, "grace_days": settings.PRIVACY_DELETION_GRACE_DAYS},
    )


@login_required
@require_POST
def deletion_cancel(request: HttpRequest) -> HttpResponse:
    open_request = selectors.deletion_open_for(user=request.user)
    if open_request is None:
        raise Http404
    if services.deletion_cancel(request=open_request):
        messages.success(request, _("Deletion cancelled: your account stays."))
    else:
        messages.error(request, _("The deletion has already started and can no longer be cancelled."))
    return redirect("privacy_data")


# --- Staff --------------------------------------------------------------------------------------------


@staff_only
def staff_index(request: HttpRequest) -> HttpResponse:
    """Deletion requests (open first) and the legal texts' versions."""
    requests = selectors.deletion_requests_staff()
    return render(
        request,
        "privacy/staff.html",
        {
            "open_requests": requests.filter(status__in=DeletionRequest.OPEN),
            "closed_requests": requests.exclude(status__in=DeletionRequest.OPEN)[:50],
            "documents": [
                (kind, label, selectors.document_versions(kind=kind)[:10]) for kind, label in DocumentKind.choices
            ],
            "in_force": set(selectors.documents_in_force_ids().values()),
        },
    )


@staff_only
@require_POST
def staff_draft_create(request: HttpRequest, kind: str) -> HttpResponse:
    try:
        draft = services.document_draft_create(kind=kind, actor=request.user)
    except PrivacyError as exc:
        messages.error(request, exc.message)
        return redirect("privacy_staff")
    return redirect("privacy_staff_document", version_id=draft.pk)


@staff_only
def staff_document(request: HttpRequest, version_id: int) -> HttpResponse:
    """Edit a draft (both languages) and publish it; a published version is shown read-only."""
    version = get_object_or_404(DocumentVersion, pk=version_id)
    form = DocumentDraftForm(request.POST or None, instance=version)
    if request.method == "POST":
        if version.is_published:
            messages.error(request, _("A published version cannot be changed: make a new draft instead."))
            return redirect("privacy_staff_document", version_id=version.pk)
        if form.is_valid():
            try:
                services.document_draft_update(version=version, **{f: form.cleaned_data[f] for f in form.fields})
                if "publish" in request.POST:
                    services.document_publish(version=version, actor=request.user)
                    messages.success(request, _("Published: users are asked to accept it at their next request."))
                    return redirect("privacy_staff")
                messages.success(request, _("Draft saved."))
            except PrivacyError as exc:
                messages.error(request, exc.message)
            return redirect("privacy_staff_document", version_id=version.pk)
    return render(request, "privacy/staff_document.html", {"version": version, "form": form})
