"""Staff pages for billing: the ledger checks, balance adjustments. Everyone else gets a 404."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from billing.selectors import adjustments_recent, balance_get, ledger_checks_recent
from billing.services import InsufficientFunds, balance_adjust, ledger_check_record
from billing.staff_forms import BalanceAdjustForm
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
