"""The budget page: this month's spending against the budget, and the form that sets it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from budgets import selectors, services
from budgets.forms import BudgetForm
from budgets.models import THRESHOLDS


@login_required
def budget(request: HttpRequest) -> HttpResponse:
    status = selectors.budget_status_for(user=request.user)
    if request.method == "POST":
        form = BudgetForm(request.POST)
        if form.is_valid():
            services.budget_set(
                user=request.user, monthly_limit_fen=form.cleaned_data["amount"], hard_cap=form.cleaned_data["hard_cap"]
            )
            messages.success(
                request, _("Budget saved.") if form.cleaned_data["amount"] is not None else _("Budget removed.")
            )
            return redirect("budget")
    else:
        initial = {}
        if status.budget is not None:
            fen = status.budget.monthly_limit_fen
            initial = {"amount": f"{fen // 100}.{fen % 100:02d}", "hard_cap": status.budget.hard_cap}
        form = BudgetForm(initial=initial)
    return render(request, "budgets/budget.html", {"form": form, "status": status, "thresholds": THRESHOLDS})
