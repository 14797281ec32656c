"""Staff pages for the fleet (regions, their backends and nodes, and a "sync now") and for reserved capacity.
Everyone else gets a 404."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from core.views import staff_only
from instances import errors, selectors, services
from instances.capacity import reservations
from instances.forms import ReservationForm
from instances.hooks import gpu_metrics_hooks
from instances.models import Region, Reservation
from instances.quota import account_label


@staff_only
def staff_fleet(request: HttpRequest) -> HttpResponse:
    """The whole page, or (htmx, every 30 s) the body it is made of."""
    fleet = selectors.fleet_overview()
    # Real GPU work beside allocation (instances.hooks.gpu_metrics): per GPU model and per node.
    use = gpu_metrics_hooks().fleet_use()
    for row in fleet["gpu_models"]:
        row["gpu_use"] = use["models"].get(row["gpu_model"].pk)
    for region in fleet["regions"]:
        for node in region["nodes"]:
            node.gpu_use_pct = use["nodes"].get(node.pk)
    context = {"fleet": fleet}
    if request.htmx:
        return render(request, "instances/_fleet_body.html", context)
    return render(request, "instances/fleet.html", context)


@staff_only
@require_POST
def staff_fleet_sync(request: HttpRequest, slug: str) -> HttpResponse:
    """Read the region's nodes from its backend now (and mark what a lost node took with it)."""
    region = get_object_or_404(Region, slug=slug)
    try:
        result = services.region_nodes_sync(region=region)
    except errors.InstanceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("%(region)s synced: %(nodes)d nodes, %(unhealthy)d out of service, %(synced)d instances checked.")
            % {"region": region.name, **result},
        )
    return redirect("staff_fleet")


# --- Reserved capacity ---------------------------------------------------------------------------------------


@staff_only
def staff_reservations(request: HttpRequest) -> HttpResponse:
    """Every reservation (what each holder uses of it) and the form that grants one."""
    form = ReservationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            reservation = reservations.reservation_create(
                account=reservations.reservation_account_find(text=data["account"]),
                region=data["region"],
                gpu_model=data["gpu_model"],
                cards=data["cards"],
                starts_at=data["starts_at"],
                ends_at=data["ends_at"],
                note=data["note"],
                staff=request.user,
            )
        except errors.InstanceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(
                request,
                _("Reserved %(n)d %(gpu)s cards in %(region)s for %(account)s.")
                % {
                    "n": reservation.cards,
                    "gpu": reservation.gpu_model.name,
                    "region": reservation.region.name,
                    "account": account_label(reservation.account),
                },
            )
            return redirect("staff_reservations")
    status = 400 if request.method == "POST" else 200
    context = {"form": form, "reservations": selectors.reservations_staff_list()}
    return render(request, "instances/reservations_staff.html", context, status=status)


@staff_only
@require_POST
def staff_reservation_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """End a reservation now: its cards go back to everyone."""
    reservation = get_object_or_404(Reservation, pk=pk)
    try:
        reservations.reservation_cancel(reservation_id=reservation.pk, staff=request.user)
    except errors.InstanceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Reservation cancelled; its cards are free for everyone."))
    return redirect("staff_reservations")
