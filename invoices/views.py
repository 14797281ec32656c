"""Invoice pages: the user's requests and downloads; the staff queue. Thin: the rules are in services."""

from __future__ import annotations

from datetime import date, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from billing import access as billing_access
from core.views import staff_only
from invoices import selectors
from invoices.forms import InvoiceDeclineForm, InvoiceIssueForm, InvoiceRequestForm
from invoices.models import InvoiceRequest
from invoices.services import InvoiceRefused, invoice_decline, invoice_issue, invoice_request


def _past_months(count: int = 12) -> list[date]:
    month = timezone.localdate().replace(day=1)
    months = []
    for _i in range(count):
        month = (month - timedelta(days=1)).replace(day=1)
        months.append(month)
    return months


@login_required
def invoices(request: HttpRequest) -> HttpResponse:
    """The acting account's invoice requests and the form to ask for one (of what is left to invoice).

    In a team's context the invoices are the team's (its top-ups and months), for those who may see
    its billing; the address the PDF goes to starts as the person's own (a team's account has none)."""
    if not billing_access.allows(request, billing_access.VIEW):
        raise PermissionDenied(_("Your role in this team does not include its billing."))
    user = billing_access.principal(request)
    orders = selectors.invoiceable_orders(user=user)
    months = selectors.invoiceable_months(user=user, months=_past_months())
    form = InvoiceRequestForm(request.POST or None, orders=orders, months=months, initial={"email": request.user.email})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                invoice = invoice_request(
                    user=user,
                    amount_fen=data["amount"],
                    title_type=data["title_type"],
                    title=data["title"],
                    tax_number=data.get("tax_number", ""),
                    email=data["email"],
                    order_id=data["order_id"],
                    month=data["month"],
                )
            except InvoiceRefused as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(
                    request,
                    _("Invoice request #%(n)s was sent; you will get an e-mail when it is issued.") % {"n": invoice.pk},
                )
                return redirect("invoices")
        status = 400
    return render(
        request,
        "invoices/list.html",
        {"form": form, "invoices": selectors.invoices_for(user=user), "can_request": bool(orders or months)},
        status=status,
    )


@login_required
def invoice_pdf(request: HttpRequest, invoice_id: int) -> HttpResponse:
    """The issued PDF, to its owner (the acting account, for those who may see its billing) or staff;
    anyone else, or a request not issued, gets a 404."""
    if request.user.is_staff:
        invoice = get_object_or_404(InvoiceRequest, pk=invoice_id)
    else:
        if not billing_access.allows(request, billing_access.VIEW):
            raise Http404
        try:
            invoice = selectors.invoice_get(user=billing_access.principal(request), invoice_id=invoice_id)
        except InvoiceRequest.DoesNotExist:
            raise Http404 from None
    if invoice.status != InvoiceRequest.Status.ISSUED or not invoice.pdf:
        raise Http404
    response = HttpResponse(bytes(invoice.pdf), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{invoice.pdf_name}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@staff_only
def staff_queue(request: HttpRequest) -> HttpResponse:
    queue = selectors.invoice_queue()
    return render(
        request,
        "invoices/staff_queue.html",
        {
            "waiting": queue.filter(status=InvoiceRequest.Status.REQUESTED).order_by("created_at"),
            "decided": queue.exclude(status=InvoiceRequest.Status.REQUESTED).order_by("-decided_at")[:50],
            "issue_form": InvoiceIssueForm(),
            "decline_form": InvoiceDeclineForm(),
        },
    )


@staff_only
@require_POST
def staff_decide(request: HttpRequest, invoice_id: int, action: str) -> HttpResponse:
    """Issue (number + PDF) or decline (reason) one waiting request; errors come back as messages."""
    if action not in ("issue", "decline"):
        raise Http404
    invoice = get_object_or_404(InvoiceRequest, pk=invoice_id)
    form = InvoiceIssueForm(request.POST, request.FILES) if action == "issue" else InvoiceDeclineForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect("invoices_staff")
    try:
        if action == "issue":
            moved = invoice_issue(
                invoice=invoice,
                staff=request.user,
                pdf=form.cleaned_data["pdf"].read(),
                invoice_number=form.cleaned_data["invoice_number"],
            )
        else:
            moved = invoice_decline(invoice=invoice, staff=request.user, reason=form.cleaned_data["reason"])
    except InvoiceRefused as exc:
        messages.error(request, str(exc))
        return redirect("invoices_staff")
    if moved:
        messages.success(request, _("Invoice request #%(n)s was decided; the user was told.") % {"n": invoice.pk})
    else:
        messages.info(request, _("Invoice request #%(n)s was already decided.") % {"n": invoice.pk})
    return redirect("invoices_staff")
