"""Billing pages: the overview, top-ups and the simulated checkout, statements, the webhook endpoint.

Every page reads and spends the wallet of the account the request acts on (``billing.access``): the
person's own, or in a team the team's, where it needs the role's leave (``view``: owners, admins and
billing viewers; ``pay``: owners and admins). A role without it gets a 403 that says so.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from billing import access, selectors
from billing import statements as stmt
from billing.charts import spend_chart
from billing.forms import TopUpForm
from billing.gateways import GatewayError, WebhookRejected, gateway_get
from billing.gateways.simulated import SimulatedGateway
from billing.models import TopUpOrder, Transaction
from billing.payments import InvalidGateway, topup_checkout_simulate, topup_order_create, topup_webhook_receive
from billing.qr import qr_svg
from billing.services import TrialUnavailable, trial_claim
from core.csvexport import csv_writer
from core.drf import error_body
from identity.errors import RealNameRequired

logger = logging.getLogger(__name__)


def _wallet(request: HttpRequest, action: str = access.VIEW):
    """The account whose wallet this page shows, once the person may ``action`` on it."""
    if not access.allows(request, action):
        if action == access.PAY:
            raise PermissionDenied(_("Only the team's owners and admins top up its wallet."))
        raise PermissionDenied(_("Your role in this team does not include its billing."))
    return access.principal(request)


def _overview_context(request: HttpRequest, form: TopUpForm | None = None) -> dict:
    user = _wallet(request)
    membership = getattr(request, "membership", None)
    return {
        "team": membership.team if membership is not None else None,
        "can_pay": access.allows(request, access.PAY),
        "balance": selectors.balance_get(user=user),
        "runway": selectors.runway_get(user=user),
        "chart": spend_chart(selectors.spend_per_day(user=user, days=30)),
        "recent": list(selectors.transactions_for(user=user)[:10]),
        "orders": list(selectors.topup_orders_for(user=user)[:10]),
        "form": form or TopUpForm(),
        "presets": settings.BILLING_TOPUP_PRESETS_FEN,
        "limits": (settings.BILLING_TOPUP_MIN_FEN, settings.BILLING_TOPUP_MAX_FEN),
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "billing/overview.html", _overview_context(request))


@login_required
def transactions(request: HttpRequest) -> HttpResponse:
    kind = request.GET.get("kind") or ""
    if kind not in Transaction.Kind.values:
        kind = ""
    page = Paginator(selectors.transactions_for(user=_wallet(request), kind=kind or None), 50).get_page(
        request.GET.get("page")
    )
    return render(request, "billing/transactions.html", {"page": page, "kind": kind, "kinds": Transaction.Kind.choices})


@login_required
@require_POST
def topup_create(request: HttpRequest) -> HttpResponse:
    user = _wallet(request, access.PAY)
    form = TopUpForm(request.POST)
    if not form.is_valid():
        return render(request, "billing/overview.html", _overview_context(request, form), status=400)
    try:
        _order, checkout_url = topup_order_create(
            user=user,
            amount_fen=form.cleaned_data["amount_fen"],
            return_url=request.build_absolute_uri(reverse("billing")) + "orders/{order}/",
            gateway_name=form.cleaned_data["gateway"],
            payer=request.user,
        )
    except InvalidGateway as exc:
        form.add_error("gateway", str(exc))
        return render(request, "billing/overview.html", _overview_context(request, form), status=400)
    except RealNameRequired as exc:
        form.add_error(None, exc.message)
        return render(request, "billing/overview.html", _overview_context(request, form), status=403)
    except GatewayError:
        logger.exception("creating a checkout failed")
        messages.error(request, _("The payment service is not reachable. Please try again in a few minutes."))
        return redirect("billing")
    return redirect(checkout_url)


@login_required
def order_detail(request: HttpRequest, order_id: int) -> HttpResponse:
    try:
        order = selectors.topup_order_get(user=_wallet(request), order_id=order_id)
    except TopUpOrder.DoesNotExist:
        raise Http404 from None
    pending = order.status == TopUpOrder.Status.PENDING
    gateway = _gateway_or_none(order.gateway)
    can_pay = pending and isinstance(gateway, SimulatedGateway)
    return render(
        request,
        "billing/order_detail.html",
        {
            "order": order,
            "refunds": order.refunds.all(),
            "can_pay": can_pay,
            "gateway_label": gateway.label if gateway else order.gateway,
            # Rendered here, as SVG, from the code the gateway gave: no script, no CDN.
            "qr": qr_svg(order.checkout_qr) if pending and order.checkout_qr else "",
        },
    )


def _gateway_or_none(name: str):
    try:
        return gateway_get(name)
    except LookupError:
        return None


@login_required
def simulated_checkout(request: HttpRequest, order_id: int) -> HttpResponse:
    """The simulated gateway's own checkout page: Approve or Decline, then a signed webhook to ourselves."""
    gateway = _gateway_or_none(SimulatedGateway.name)
    if not isinstance(gateway, SimulatedGateway):
        raise Http404
    try:
        order = selectors.topup_order_get(user=_wallet(request, access.PAY), order_id=order_id)
    except TopUpOrder.DoesNotExist:
        raise Http404 from None
    if order.gateway != gateway.name:
        raise Http404
    if request.method == "POST":
        action = request.POST.get("action")
        if action not in ("approve", "decline"):
            return render(request, "billing/simulated_checkout.html", {"order": order}, status=400)
        if order.status != TopUpOrder.Status.PENDING:
            messages.info(request, _("This order is no longer awaiting payment."))
            return redirect("billing_order", order_id=order.pk)
        try:
            outcome = topup_checkout_simulate(gateway=gateway, order=order, approve=action == "approve")
        except WebhookRejected as exc:  # pragma: no cover - only a misconfigured secret gets here
            logger.error("the simulated gateway's own webhook was rejected: %s", exc.code)
            messages.error(request, _("The payment could not be confirmed."))
            return redirect("billing_order", order_id=order.pk)
        if outcome.result == "credited":
            messages.success(request, _("Payment received: your balance was topped up."))
        elif outcome.result == "failed":
            messages.warning(request, _("The payment was declined; nothing was charged."))
        return redirect("billing_order", order_id=order.pk)
    return render(request, "billing/simulated_checkout.html", {"order": order, "gateway": gateway})


@csrf_exempt
@require_POST
def webhook(request: HttpRequest, gateway: str) -> HttpResponse:
    """A gateway's webhook: verified, recorded once, applied once. Bad requests change nothing (4xx)."""
    try:
        outcome = topup_webhook_receive(gateway_name=gateway, body=request.body, headers=request.headers)
    except WebhookRejected as exc:
        logger.warning("webhook rejected (%s): %s", exc.code, exc.message)
        return JsonResponse(error_body(code=exc.code, message=exc.message), status=exc.status)
    ack = gateway_get(gateway).webhook_ack()
    if ack is not None:  # the answer this gateway reads as "received, stop retrying"
        status, content_type, body = ack
        return HttpResponse(body, status=status, content_type=content_type)
    return JsonResponse({"received": True, "event": outcome.event.id, "result": outcome.result})


@login_required
@require_POST
def trial_claim_view(request: HttpRequest) -> HttpResponse:
    if getattr(request, "membership", None) is not None or access.is_team_account(access.principal(request)):
        messages.error(request, _("A team gets no trial credit: switch to Personal to claim yours."))
    else:
        try:
            trial_claim(user=request.user)
        except TrialUnavailable as exc:
            messages.error(request, str(exc))  # unverified as identity requires, the person's trial taken, none offered
        else:
            messages.success(
                request,
                _("Your trial credit of ¥%(amount)s is ready: it is spent before your paid balance.")
                % {"amount": f"{settings.BILLING_TRIAL_CREDIT_FEN / 100:.2f}"},
            )
    target = request.POST.get("next") or reverse("dashboard")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = reverse("dashboard")
    return redirect(target)


# --- Statements -----------------------------------------------------------------------------------


def _month_or_404(text: str):
    month = stmt.month_parse(text)
    if month is None or month > timezone.localdate(timezone.now(), timezone.get_default_timezone()).replace(day=1):
        raise Http404
    return month


@login_required
def statements(request: HttpRequest) -> HttpResponse:
    user = _wallet(request)
    return render(
        request, "billing/statements.html", {"months": stmt.statement_months(user=user), "team": _team(request)}
    )


@login_required
def statement_detail(request: HttpRequest, month: str) -> HttpResponse:
    statement = stmt.statement_get(user=_wallet(request), month=_month_or_404(month))
    return render(
        request,
        "billing/statement_detail.html",
        {"statement": statement, "s": statement.summary, "time_zone": settings.TIME_ZONE, "team": _team(request)},
    )


def _team(request: HttpRequest):
    membership = getattr(request, "membership", None)
    return membership.team if membership is not None else None


CSV_COLUMNS = [
    "meter",
    "resource",
    "description",
    "start",
    "end",
    "seconds",
    "quantity",
    "unit",
    "rate_cny_per_unit",
    "amount_cny",
]


@login_required
def statement_csv(request: HttpRequest, month: str) -> HttpResponse:
    parsed = _month_or_404(month)
    statement = stmt.statement_get(user=_wallet(request), month=parsed)
    tz = timezone.get_default_timezone()
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="statement-{parsed:%Y-%m}.csv"'
    writer = csv_writer(response)
    writer.writerow(CSV_COLUMNS)
    for line in statement.lines:
        writer.writerow(
            [
                line.meter_id or "",
                line.ref,
                line.description,
                timezone.localtime(line.start, tz).isoformat() if line.start else "",
                timezone.localtime(line.end, tz).isoformat() if line.end else "",
                line.seconds,
                line.quantity,
                line.unit,
                stmt.fen_to_decimal_string(line.price_fen),
                stmt.fen_to_decimal_string(line.amount_fen),
            ]
        )
    return response


BREAKDOWN_COLUMNS = {
    "members": ["member_id", "member", "lines", "seconds", "amount_cny"],
    "instances": ["resource", "name", "launched_by", "lines", "seconds", "amount_cny"],
}


@login_required
def statement_breakdown_csv(request: HttpRequest, month: str, breakdown: str) -> HttpResponse:
    """The month's usage per member (a team's statement only) or per instance, as CSV."""
    parsed = _month_or_404(month)
    if breakdown == "members" and _team(request) is None:
        raise Http404
    statement = stmt.statement_get(user=_wallet(request), month=parsed)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="statement-{parsed:%Y-%m}-{breakdown}.csv"'
    writer = csv_writer(response)
    writer.writerow(BREAKDOWN_COLUMNS[breakdown])
    if breakdown == "members":
        for row in statement.by_member:
            writer.writerow(
                [row.key or "", row.label, row.lines, row.seconds, stmt.fen_to_decimal_string(row.amount_fen)]
            )
    else:
        for row in statement.by_resource:
            writer.writerow(
                [
                    row.key,
                    row.label,
                    row.member_label,
                    row.lines,
                    row.seconds,
                    stmt.fen_to_decimal_string(row.amount_fen),
                ]
            )
    return response
