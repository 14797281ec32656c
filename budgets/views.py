"""The budget page: this month's spending against the budget, and the form that sets it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from budgets import selectors, services
from budgets.forms import BudgetForm, InstanceCapForm
from budgets.models import THRESHOLDS
from instances.selectors import instance_get_for


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


@login_required
@require_POST
def instance_cap(request: HttpRequest, pk) -> HttpResponse:
    """Set or remove "stop this one after ¥X" from the instance's page (a stranger's instance: 404)."""
    instance = instance_get_for(user=request.user, instance_id=pk)
    form = InstanceCapForm(request.POST)
    if form.is_valid():
        services.instance_cap_set(instance=instance, limit_fen=form.cleaned_data["amount"])
        messages.success(
            request, _("Spending limit saved.") if form.cleaned_data["amount"] else _("Spending limit removed.")
        )
    else:
        messages.error(request, " ".join(form.errors.get("amount", [])))
    return redirect("instance_detail", pk=instance.pk)
