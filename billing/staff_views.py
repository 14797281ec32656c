"""Staff pages for billing: the ledger checks, balance adjustments. Everyone else gets a 404."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from billing.gateways import GatewayError
from billing.models import TopUpOrder
from billing.payments import RefundRefused, topup_refund
from billing.reconciliation import reconciliations_recent
from billing.selectors import adjustments_recent, balance_get, ledger_checks_recent, refunds_recent
from billing.services import InsufficientFunds, balance_adjust, ledger_check_record
from billing.staff_forms import BalanceAdjustForm, RefundForm
from core.formatting import cny
from core.views import staff_only


@staff_only
def staff_billing(request: HttpRequest) -> HttpResponse:
    form = BalanceAdjustForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.cleaned_data["user"]
        try:
            balance_adjust(
                user=user,
                amount_fen=form.cleaned_data["amount"],
                reason=form.cleaned_data["reason"],
                staff_user=request.user,
                key=form.cleaned_data["key"],
            )
        except InsufficientFunds:
            form.add_error("amount", _("This would take the user's paid balance below zero."))
        else:
            messages.success(
                request,
                _("Adjusted the paid balance of %(email)s; it is now %(balance)s.")
                % {"email": user.email, "balance": cny(balance_get(user=user).cash)},
            )
            return redirect("staff_billing")
    checks = list(ledger_checks_recent(limit=20))
    return render(
        request,
        "billing/staff.html",
        {
            "form": form,
            "checks": checks,
            "last_check": checks[0] if checks else None,
            "adjustments": adjustments_recent(limit=50),
            "reconciliations": reconciliations_recent(limit=30),
        },
    )


@staff_only
def staff_ledger_check_run(request: HttpRequest) -> HttpResponse:
    """Run the ledger check now (POST) and show its result at the top of the page."""
    if request.method != "POST":
        return redirect("staff_billing")
    run = ledger_check_record()
    if run.ok:
        messages.success(request, _("The ledger balances."))
    else:
        messages.error(request, _("The ledger check found %(n)d problems.") % {"n": len(run.problems)})
    return redirect("staff_billing")


@staff_only
def staff_refunds(request: HttpRequest) -> HttpResponse:
    """Refund (part of) a paid top-up through its gateway; the gateway's answer is shown either way.

    ``?order=N`` fills the form with what can still go back. The refund is posted to the ledger only
    when the gateway accepts it (``topup_refund``); a refusal is shown as the gateway worded it.
    """
    order = None
    if request.method == "POST":
        form = RefundForm(request.POST)
    else:
        order_id = request.GET.get("order", "")
        order = (
            TopUpOrder.objects.select_related("user").filter(pk=int(order_id)).first() if order_id.isdigit() else None
        )
        initial = {"order": order.pk, "amount": f"{order.refundable_fen / 100:.2f}"} if order else {}
        form = RefundForm(initial=initial)
    if request.method == "POST" and form.is_valid():
        order = TopUpOrder.objects.select_related("user").filter(pk=form.cleaned_data["order"]).first()
        if order is None:
            form.add_error("order", _("No top-up order has this number."))
        else:
            try:
                refund = topup_refund(
                    order=order,
                    amount_fen=form.cleaned_data["amount"],
                    reason=form.cleaned_data["reason"],
                    key=f"staff:{form.cleaned_data['key']}",
                    created_by=request.user,
                )
            except RefundRefused as exc:
                form.add_error(None, str(exc))
            except GatewayError as exc:
                form.add_error(None, _("The payment gateway refused the refund: %(answer)s") % {"answer": exc})
            else:
                messages.success(
                    request,
                    _("Refunded %(amount)s of top-up #%(order)s to %(email)s; the gateway's refund id is %(ref)s.")
                    % {
                        "amount": cny(refund.amount_fen),
                        "order": order.pk,
                        "email": order.user.email,
                        "ref": refund.gateway_refund_id,
                    },
                )
                return redirect("staff_refunds")
    return render(request, "billing/staff_refunds.html", {"form": form, "order": order, "refunds": refunds_recent()})
