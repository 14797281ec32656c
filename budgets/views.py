"""The budget page: this month's spending against the budget, and the form that sets it.

In the acting context: the acting account's budget. In a team, seeing it needs ``billing.view`` or
``budgets.manage``, setting it ``budgets.manage`` (a 403 with a message otherwise; no form shown).
An instance's spending limit is changed by whoever operates the instance (``teams.access``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from budgets import selectors, services
from budgets.forms import BudgetForm, InstanceCapForm
from budgets.models import THRESHOLDS
from instances.selectors import instance_get_for
from teams.access import request_acting, request_can, require_access, require_permission
from teams.roles import Permission


@login_required
def budget(request: HttpRequest) -> HttpResponse:
    may_manage = request_can(request, Permission.BUDGETS_MANAGE)
    if not (may_manage or request_can(request, Permission.BILLING_VIEW)):
        raise PermissionDenied(_("Your role in this team does not show its budget."))
    principal = request_acting(request)[0]
    status = selectors.budget_status_for(user=principal)
    if request.method == "POST":
        require_permission(
            request, Permission.BUDGETS_MANAGE, _("Your role in this team does not allow setting its budget.")
        )
        form = BudgetForm(request.POST)
        if form.is_valid():
            services.budget_set(
                user=principal,
                monthly_limit_fen=form.cleaned_data["amount"],
                hard_cap=form.cleaned_data["hard_cap"],
                actor=request.user,
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
    return render(
        request,
        "budgets/budget.html",
        {"form": form, "status": status, "thresholds": THRESHOLDS, "may_manage": may_manage},
    )


@login_required
@require_POST
def instance_cap(request: HttpRequest, pk) -> HttpResponse:
    """Set or remove "stop this one after ¥X" from the instance's page (a stranger's instance: 404; one
    this person may see but not operate: 403)."""
    instance = instance_get_for(user=request_acting(request)[0], instance_id=pk)
    require_access(
        request,
        owner_id=instance.owner_id,
        created_by_id=instance.created_by_id,
        operate=True,
        message=_("Only the instance's creator or a team admin can change its spending limit."),
    )
    form = InstanceCapForm(request.POST)
    if form.is_valid():
        services.instance_cap_set(instance=instance, limit_fen=form.cleaned_data["amount"])
        messages.success(
            request, _("Spending limit saved.") if form.cleaned_data["amount"] else _("Spending limit removed.")
        )
    else:
        messages.error(request, " ".join(form.errors.get("amount", [])))
    return redirect("instance_detail", pk=instance.pk)
