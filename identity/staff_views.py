"""Staff's review of organisations' real-name applications: the queue, the licence, the decision."""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from core.views import staff_only
from identity import selectors, services
from identity.errors import IdentityError
from identity.forms import ReviewForm
from identity.models import RealNameVerification


@staff_only
def review_queue(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "identity/staff_queue.html",
        {"pending": list(selectors.real_name_queue()), "decided": selectors.real_name_decided(), "form": ReviewForm()},
    )


@staff_only
def review_document(request: HttpRequest, verification_id: int) -> FileResponse:
    row = get_object_or_404(
        RealNameVerification, pk=verification_id, kind=RealNameVerification.Kind.ORGANISATION, status="pending"
    )
    if not row.document:
        raise Http404
    try:
        handle = row.document.open("rb")
    except FileNotFoundError:
        raise Http404 from None
    # Inline for PDFs and images; nosniff keeps a browser from reading it as anything else.
    response = FileResponse(handle, filename=row.document.name.rsplit("/", 1)[-1])
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@staff_only
@require_POST
def review_decide(request: HttpRequest, verification_id: int) -> HttpResponse:
    form = ReviewForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose approve or reject."))
        return redirect("identity_review_queue")
    try:
        moved = services.real_name_review(
            verification_id=verification_id,
            staff_user=request.user,
            approve=form.cleaned_data["decision"] == "approve",
            reason=form.cleaned_data["reason"],
        )
    except RealNameVerification.DoesNotExist:
        raise Http404 from None
    except IdentityError as exc:
        messages.error(request, exc.message)
        return redirect("identity_review_queue")
    if moved:
        messages.success(request, _("Decision saved."))
    else:
        messages.info(request, _("Another reviewer decided this one first."))
    return redirect("identity_review_queue")
