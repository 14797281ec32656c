"""Pages: the instance list, launch, detail (with its live partials), GPU quota and the staff review.

Each view serves its whole page or, for htmx and the live channel, the partial it is made of, so a
live update swaps in exactly what a reload would show.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from instances import errors, hooks, selectors, services, tasks
from instances.acting import (
    acting,
    acting_can,
    instances_mark,
    require_launch,
    require_operate,
    require_quota_request,
    require_view,
)
from instances.boot import boot_timeline
from instances.capacity import resize, start_queue
from instances.forms import (
    AutoStopForm,
    CloneForm,
    ImageBuildForm,
    ImageImportForm,
    ImageRenameForm,
    ImageSaveForm,
    InstanceSecretsForm,
    LaunchForm,
    QuotaDecisionForm,
    QuotaRequestForm,
    RenameForm,
    ResizeForm,
    SnapshotCreateForm,
    SnapshotScheduleForm,
)
from instances.hooks import gpu_metrics_hooks, volume_hooks
from instances.images import image_access, images_saved_for
from instances.models import Image, Instance, QuotaRequest, Region, Snapshot, SnapshotSchedule
from instances.quota import account_label, quota_request_approve, quota_request_create, quota_request_deny
from teams.access import Access
from teams.roles import Permission

ACTIONS = {
    "start": services.instance_start,
    # No-GPU mode: the same disk and image, CPU only, at the no-GPU price (a stopped single machine).
    "start-no-gpu": functools.partial(services.instance_start, no_gpu=True),
    "stop": services.instance_stop,
    "restart": services.instance_restart,
    "release": services.instance_release,
    "keep-running": services.instance_auto_stop_snooze,
    "wait-in-line": start_queue.instance_start_or_wait,
    "leave-line": start_queue.instance_start_queue_leave,
}
# The verbs told who asks (a team's audit log).
ACTORS = frozenset({"start", "start-no-gpu", "stop", "restart", "release", "wait-in-line"})
PROVISIONING_STEPS = [
    ("requested", _("Request accepted")),
    ("scheduling", _("GPUs reserved on a node")),
    ("provisioning", _("Machine created and booting")),
    ("running", _("Running")),
]


def _forbidden(request: HttpRequest, exc: errors.InstanceError) -> HttpResponse:
    """A 403 that says why: the person can see the instance (or the team) but their role does not allow this."""
    return render(request, "instances/forbidden.html", {"message": exc.message}, status=403)


def _visible(request: HttpRequest, pk) -> Instance:
    """The acting principal's instance (another account's: 404), marked ``view_only`` when the person
    may see it and not act on it."""
    require_view(request)
    principal, _membership = acting(request)
    instance = selectors.instance_get_for(user=principal, instance_id=pk)
    return instances_mark(request, [instance])[0]


@login_required
def instance_list(request: HttpRequest) -> HttpResponse:
    try:
        require_view(request)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    show_released = request.GET.get("released") == "1"
    principal, membership = acting(request)
    qs = selectors.instance_list_for(user=principal, include_released=show_released)
    if membership is not None:  # "launched by" is shown in a team's list
        qs = qs.select_related("created_by")
    try:
        per_page = min(max(int(request.GET.get("page_size", 25)), 10), 100)
    except ValueError:
        per_page = 25
    page = Paginator(qs, per_page).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "instances": instances_mark(request, _with_gpu_use(list(page.object_list))),
        "show_released": show_released,
        "can_launch": acting_can(request, Permission.RESOURCES_LAUNCH),
    }
    if request.htmx:
        return render(request, "instances/_instance_table.html", context)
    return render(request, "instances/list.html", context)


@login_required
def instance_launch(request: HttpRequest) -> HttpResponse:
    try:
        require_launch(request)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    principal, membership = acting(request)
    saved = list(
        images_saved_for(principal=principal, membership=membership, user=request.user).filter(
            status=Image.Status.READY
        )
    )
    form = None
    if request.method == "POST":
        form = LaunchForm(request.POST, user=request.user, account=principal, saved_images=saved)
        if form.is_valid():
            data = form.cleaned_data
            try:
                instance = services.instance_launch(services.LaunchRequest(user=principal, actor=request.user, **data))
            except errors.InstanceError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            else:
                messages.success(request, _("%(name)s is being created.") % {"name": instance.name})
                return redirect("instance_detail", pk=instance.pk)
    tasks.nodes_ensure_soon()
    options = selectors.launch_options_for(user=principal)
    if form is None:
        defaults = options["defaults"]
        region = defaults["region"]
        initial = {"region": region, "gpu_model": defaults["gpu_by_region"].get(str(region))}
        chosen = next((image for image in saved if image.slug == request.GET.get("image")), None)
        if chosen is not None:  # "Launch from it" on the Images page
            initial["image"] = chosen.pk
        form = LaunchForm(
            user=request.user,
            account=principal,
            saved_images=saved,
            initial={k: v for k, v in initial.items() if v is not None},
        )
    regions = list(Region.objects.filter(pk__in=[r["id"] for r in options["regions"]]))
    return render(
        request,
        "instances/launch.html",
        {
            "form": form,
            "options": options,
            "images": selectors.launch_images(regions=regions, saved=saved),
            "has_ssh_key": request.user.ssh_keys.exists(),
        },
    )


@login_required
def instance_detail(request: HttpRequest, pk) -> HttpResponse:
    try:
        instance = _visible(request, pk)
    except errors.NotPermitted:
        raise Http404 from None  # a role that shows no instances: as if there were none
    if request.GET.get("partial") == "row":
        return render(request, "instances/_instance_row.html", {"instance": _with_gpu_use([instance])[0]})
    events = list(selectors.instance_events(instance=instance))
    reached = {e.new for e in events}
    steps = [(key, label, key in reached) for key, label in PROVISIONING_STEPS]
    context = {
        "instance": instance,
        "events": events,
        "steps": steps,
        "show_steps": instance.status
        in (Instance.Status.REQUESTED, Instance.Status.SCHEDULING, Instance.Status.PROVISIONING)
        or instance.status == Instance.Status.FAILED,
        "rename_form": RenameForm(initial={"name": instance.name}),
        "image_save_form": ImageSaveForm(),
        **_snapshots_context(instance),
        "saved_images": _saved_from(request, instance),
        "auto_stop_form": AutoStopForm(
            initial={"at": instance.auto_stop_at, "idle_minutes": instance.auto_stop_idle_minutes}
        ),
        # Read from the provider's class, never asked of the provider: whether its clusters resize.
        "resize_form": ResizeForm(choices=resize.resize_choices(instance=instance))
        if instance.node_count > 1
        else None,
        "ssh_keys": instance.ssh_keys.all(),
        "entry_points": selectors.instance_entry_points(instance=instance, host=request.get_host()),
        "experiment_runs": selectors.instance_experiment_runs(instance),
        # The launch timeline and the image pull's progress, as the worker recorded them.
        "boot": boot_timeline(instance=instance),
        "mounts": _mounts(instance),
        "secrets_form": _secrets_form(instance) if instance.status != Instance.Status.RELEASED else None,
        # Panels of the apps above: GPU charts, a spending limit, the files (hooks.detail_panels).
        "gpu_panels": [*gpu_metrics_hooks().detail_panels(instance=instance), *_detail_panels(instance)],
    }
    # A start refused for lack of cards offers to wait in line; one in line shows its place in it.
    context["start_refused"] = (
        request.session.get(_start_refused_key(instance))
        if instance.status == Instance.Status.STOPPED and instance.start_queued_at is None
        else None
    )
    context["queue_position"] = selectors.instance_start_queue_position(instance)
    # Beside the start button: whether its cards are free now, so nobody presses it blind.
    context["start_outlook"] = selectors.instance_start_outlook(instance) if instance.can_start() else None
    if request.GET.get("partial") == "body":
        return render(request, "instances/_detail_body.html", context)
    return render(request, "instances/detail.html", context)


def _detail_panels(instance: Instance) -> list[str]:
    """The templates the apps above add to the page (``hooks.detail_panels``), while it is not released."""
    if instance.status == Instance.Status.RELEASED:
        return []
    return [panel for panels in hooks.detail_panels(instance=instance) for panel in panels]


def _with_gpu_use(instances: list[Instance]) -> list[Instance]:
    """Give each running instance its ``gpu_use`` (the list's utilisation figure and sparkline), read
    for the whole page at once through ``hooks.gpu_metrics``."""
    running = [i.pk for i in instances if i.status == Instance.Status.RUNNING]
    uses = gpu_metrics_hooks().gpu_use(instance_ids=running) if running else {}
    for instance in instances:
        instance.gpu_use = uses.get(instance.pk)
    return instances


def _mounts(instance: Instance) -> list:
    return volume_hooks().mounts(instance=instance)  # storage's, through hooks.volumes


def _operable(request: HttpRequest, pk) -> Instance | HttpResponse:
    """The instance to act on, or the 403 page when the person may only see it (404: not visible)."""
    try:
        instance = _visible(request, pk)
    except errors.NotPermitted:
        raise Http404 from None
    try:
        require_operate(request, instance)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    return instance


def _back(request: HttpRequest, instance: Instance) -> HttpResponse:
    if request.htmx and request.POST.get("from") == "list":
        return render(request, "instances/_instance_row.html", {"instance": _with_gpu_use([instance])[0]})
    if request.POST.get("from") == "list":
        return redirect("instances")
    return redirect("instance_detail", pk=instance.pk)


@login_required
@require_POST
def instance_action(request: HttpRequest, pk, action: str) -> HttpResponse:
    instance = _operable(request, pk)
    if isinstance(instance, HttpResponse):
        return instance
    verb = ACTIONS.get(action)
    if verb is None:
        raise Http404
    request.session.pop(_start_refused_key(instance), None)
    try:
        instance = verb(instance=instance, **({"actor": request.user} if action in ACTORS else {}))
        instances_mark(request, [instance])
    except errors.NoCapacity as exc:
        if (
            action == "start"
            and instance.status == Instance.Status.STOPPED
            and instance.start_queued_at is None
            and request.POST.get("from") != "list"
        ):
            # The instance page shows the reason with "Wait in line" beside it, until the next action.
            request.session[_start_refused_key(instance)] = exc.message
        else:
            messages.error(request, exc.message)
    except errors.InstanceError as exc:
        messages.error(request, exc.message)
    return _back(request, instance)


def _start_refused_key(instance: Instance) -> str:
    """The session's note that a start of ``instance`` found no free cards: its reason, for the page's offer."""
    return f"instances:start-refused:{instance.pk}"


def instance_form_change(*, form: Callable[[HttpRequest, Instance], forms.Form], invalid: str):
    """A POST from a form of the instance page (rename, resize, auto-stop): the view gets an instance
    this person operates and the form's valid data, runs the service and says what it did; a refusal,
    or a form that is not valid (``invalid``), is a message on the instance's page as well."""

    def wrap(view: Callable[[HttpRequest, Instance, dict], str]):
        @login_required
        @require_POST
        @functools.wraps(view)
        def change(request: HttpRequest, pk) -> HttpResponse:
            instance = _operable(request, pk)
            if isinstance(instance, HttpResponse):
                return instance
            bound = form(request, instance)
            if not bound.is_valid():
                messages.error(request, invalid)
            else:
                try:
                    messages.success(request, view(request, instance, bound.cleaned_data))
                except errors.InstanceError as exc:
                    messages.error(request, exc.message)
            return redirect("instance_detail", pk=instance.pk)

        return change

    return wrap


@instance_form_change(
    form=lambda request, instance: RenameForm(request.POST),
    invalid=gettext_lazy("Give the instance a name of at most 64 characters."),
)
def instance_rename(request: HttpRequest, instance: Instance, data: dict) -> str:
    services.instance_rename(instance=instance, name=data["name"])
    return _("Renamed.")


def _secrets_form(instance: Instance, data=None) -> InstanceSecretsForm:
    """The owner's secrets, each with whether the instance has it (and as a variable): one query."""
    secrets = list(selectors.instance_secrets_offered(instance=instance))
    chosen = {s.pk: s.chosen_env for s in secrets if s.chosen_env is not None}
    return InstanceSecretsForm(data, secrets=secrets, chosen=chosen)


@instance_form_change(
    form=lambda request, instance: _secrets_form(instance, request.POST),
    invalid=gettext_lazy("Choose among the secrets listed."),
)
def instance_secrets(request: HttpRequest, instance: Instance, data: dict) -> str:
    """The instance page's choice of secrets: the same service as ``PUT …/secrets/`` in the API."""
    services.instance_secrets_set(instance=instance, choices=data["choices"])
    if instance.status == Instance.Status.STOPPED:
        return _("Secrets saved: the instance gets them when it starts.")
    return _("Secrets saved: the instance gets them at its next start or restart.")


@instance_form_change(
    form=lambda request, instance: ImageSaveForm(request.POST),
    invalid=gettext_lazy("Give the image a name (lower-case letters and digits, with . _ - between them) and a tag."),
)
def instance_save_image(request: HttpRequest, instance: Instance, data: dict) -> str:
    """The instance page's "Save as image": the same service as ``POST …/save-image/`` in the API."""
    image = services.image_save(instance=instance, actor=request.user, **data)
    return _("Saving %(name)s:%(tag)s. It is listed under Images, ready to launch, once it is pushed.") % {
        "name": image.name,
        "tag": image.tag,
    }


@instance_form_change(
    form=lambda request, instance: ResizeForm(request.POST, choices=resize.resize_choices(instance=instance)),
    invalid=gettext_lazy("Choose one of the sizes offered."),
)
def instance_resize(request: HttpRequest, instance: Instance, data: dict) -> str:
    """The instance page's "Cluster size" control: the same service as ``POST …/resize/`` in the API."""
    instance = resize.instance_resize(instance=instance, node_count=data["node_count"], actor=request.user)
    return _("The cluster now has %(n)d nodes.") % {"n": instance.node_count}


@instance_form_change(
    form=lambda request, instance: AutoStopForm(request.POST),
    invalid=gettext_lazy("Check the auto-stop time and minutes."),
)
def instance_auto_stop(request: HttpRequest, instance: Instance, data: dict) -> str:
    services.instance_auto_stop_set(instance=instance, at=data["at"], idle_minutes=data["idle_minutes"])
    return _("Auto-stop saved.")


# --- GPU quota ------------------------------------------------------------------------------------------


@login_required
def quota(request: HttpRequest) -> HttpResponse:
    """The acting account's quota: in a team's context the team's, for its admins and owners."""
    try:
        require_quota_request(request)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    principal, _membership = acting(request)
    form = QuotaRequestForm(request.POST or None, initial={"gpu_model": request.GET.get("gpu")})
    if request.method == "POST" and form.is_valid():
        try:
            quota_request_create(user=principal, actor=request.user, **form.cleaned_data)
        except errors.InstanceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(
                request,
                _("Request sent. Staff have been alerted and decide within %(n)d minutes; you will be told by e-mail.")
                % {"n": settings.INSTANCES_QUOTA_REVIEW_SLA_MIN},
            )
            return redirect("quota")
    return render(
        request,
        "instances/quota.html",
        {
            "rows": selectors.quota_table_for(user=principal),
            "requests": selectors.quota_requests_for(user=principal)[:20],
            "reservations": selectors.reservations_for(user=principal),
            "form": form,
        },
    )


@staff_member_required
def quota_review(request: HttpRequest) -> HttpResponse:
    """The queue, most urgent first (each request's age against ``INSTANCES_QUOTA_REVIEW_SLA_MIN``), and
    the capacity it draws on: per region the cards free and held, per model those granted and a forecast."""
    pending = [
        {
            "request": item.request,
            "sla": item,
            "context": selectors.quota_request_context(request=item.request),
            "form": QuotaDecisionForm(initial={"cards": item.request.cards, "days": item.request.duration_days}),
        }
        for item in selectors.quota_review_queue()
    ]
    recent = QuotaRequest.objects.exclude(status=QuotaRequest.Status.PENDING).select_related(
        "user", "user__team", "gpu_model", "decided_by"
    )[:20]
    return render(
        request,
        "instances/quota_review.html",
        {
            "pending": pending,
            "recent": recent,
            "capacity": selectors.quota_capacity_overview(),
            "regions": Region.objects.filter(is_active=True).order_by("name"),
            "sla_min": settings.INSTANCES_QUOTA_REVIEW_SLA_MIN,
            "overdue": sum(1 for item in pending if item["sla"].overdue),
        },
    )


@staff_member_required
@require_POST
def quota_decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    quota_request = get_object_or_404(QuotaRequest, pk=pk)
    form = QuotaDecisionForm(request.POST)
    if not form.is_valid():
        problems = " ".join(str(e) for errors_ in form.errors.values() for e in errors_)
        messages.error(request, _("Check the cards and days.") + (" " + problems if problems else ""))
        return redirect("quota_review")
    data = form.cleaned_data
    try:
        if decision == "approve":
            quota_request_approve(
                request_id=quota_request.pk,
                staff=request.user,
                cards=data["cards"],
                days=data["days"],
                message=data["message"],
                reserve_region=data["reserve_region"] if data["reserve"] else None,
                reserve_starts_at=data["reserve_starts_at"],
                reserve_ends_at=data["reserve_ends_at"],
            )
            messages.success(
                request, _("Approved; %(user)s has been told.") % {"user": account_label(quota_request.user)}
            )
        elif decision == "deny":
            quota_request_deny(request_id=quota_request.pk, staff=request.user, message=data["message"])
            messages.success(
                request, _("Declined; %(user)s has been told.") % {"user": account_label(quota_request.user)}
            )
        else:
            raise Http404
    except errors.InstanceError as exc:
        messages.error(request, exc.message)
    return redirect("quota_review")


# --- Saved images -----------------------------------------------------------------------------------------


def _saved_from(request: HttpRequest, instance: Instance) -> list[Image]:
    """The images saved from ``instance`` that this person sees, newest first (its page's list)."""
    principal, membership = acting(request)
    return list(
        images_saved_for(principal=principal, membership=membership, user=request.user).filter(
            source_instance=instance
        )[:10]
    )


def _images_page(request: HttpRequest, *, import_form: ImageImportForm | None = None, status: int = 200):
    principal, membership = acting(request)
    images = list(
        images_saved_for(principal=principal, membership=membership, user=request.user).defer("recipe", "build_log")
    )
    for image in images:
        image.operable = image_access(image=image, membership=membership, user=request.user) == Access.OPERATE
    context = {
        "images": images,
        "saving": any(image.status in (Image.Status.SAVING, Image.Status.BUILDING) for image in images),
        "in_team": membership is not None,
        "price_fen": settings.INSTANCES_IMAGE_PRICE_FEN_PER_GB_DAY,
        "may_import": acting_can(request, Permission.RESOURCES_LAUNCH),
        "import_form": import_form or ImageImportForm(),
        "allowed_registries": services.images_allowed_registries(),
    }
    if request.GET.get("partial") == "table":
        return render(request, "instances/_image_table.html", context)
    return render(request, "instances/images.html", context, status=status)


@login_required
def image_list(request: HttpRequest) -> HttpResponse:
    """The Images page: the acting account's saved and imported images this person sees, with size and
    state, and the form to bring one's own; the same page or, for htmx while a save runs, its table
    alone (``?partial=table``)."""
    try:
        require_view(request)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    return _images_page(request)


@login_required
@require_POST
def image_import(request: HttpRequest) -> HttpResponse:
    """Bring your own image from the Images page: the API's service; what the registry said is shown
    with the form (the API's status), what was found in the message after."""
    try:
        require_view(request)
        require_launch(request)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    form = ImageImportForm(request.POST)
    if not form.is_valid():
        return _images_page(request, import_form=form, status=400)
    principal, _membership = acting(request)
    try:
        image = services.image_import(owner=principal, actor=request.user, **form.cleaned_data)
    except errors.InstanceError as exc:
        field = exc.field if exc.field in form.fields else None
        form.add_error(field, exc.message)
        status = exc.status if isinstance(exc, errors.ImageImportRefused) else 400
        return _images_page(request, import_form=form, status=409 if isinstance(exc, errors.ImageExists) else status)
    found = {"name": f"{image.name}:{image.tag}", "size": filesizeformat(image.size_bytes), "platform": image.platform}
    if image.follows_contract:
        message = _("Imported %(name)s: %(size)s, %(platform)s, follows the image contract.") % found
    else:
        message = (
            _(
                "Imported %(name)s: %(size)s, %(platform)s. It does not follow the image contract: the console "
                "will mount its start script, so JupyterLab still starts."
            )
            % found
        )
    messages.success(request, message)
    return redirect("images")


def _image_seen(request: HttpRequest, slug: str) -> Image:
    """A saved image this person sees in the acting context, else a 404 (a role that shows no images
    sees none)."""
    try:
        require_view(request)
    except errors.NotPermitted:
        raise Http404 from None
    principal, membership = acting(request)
    return get_object_or_404(images_saved_for(principal=principal, membership=membership, user=request.user), slug=slug)


def _recipe_page(request: HttpRequest, image: Image, *, form: ImageBuildForm | None = None, status: int = 200):
    context = {
        "image": image,
        "building": image.status == Image.Status.BUILDING,
        "may_build": acting_can(request, Permission.RESOURCES_LAUNCH),
        "build_form": form
        or ImageBuildForm(initial={"recipe": image.recipe, "name": image.name, "tag": _next_tag(image.tag)}),
        "build_limits": services.build_limits(),
    }
    if request.GET.get("partial") == "status":
        return render(request, "instances/_image_build_status.html", context)
    return render(request, "instances/image_recipe.html", context, status=status)


def _next_tag(tag: str) -> str:
    """A tag to offer for a rebuild: ``v2`` after ``v1``, else ``<tag>-rebuilt``."""
    head, digits = tag.rstrip("0123456789"), tag[len(tag.rstrip("0123456789")) :]
    return f"{head}{int(digits) + 1}" if digits else f"{tag}-rebuilt"[:128]


@login_required
def image_recipe(request: HttpRequest, slug: str) -> HttpResponse:
    """A saved image's recipe (read-only, or downloaded as ``Containerfile`` with ``?download=1``), its build
    log when it was built here, and the Build form that takes an edited recipe; for htmx while it builds,
    its status and log alone (``?partial=status``)."""
    image = _image_seen(request, slug)
    if request.GET.get("download"):
        if not image.recipe:
            raise Http404
        response = HttpResponse(image.recipe, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="Containerfile"'
        return response
    return _recipe_page(request, image)


@login_required
@require_POST
def image_build(request: HttpRequest, slug: str) -> HttpResponse:
    """Build a new image from the recipe edited on ``slug``'s recipe page: the API's service; a refusal is
    shown with the form (400 or 409), a build started goes to the new image's page."""
    image = _image_seen(request, slug)
    try:
        require_launch(request)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    form = ImageBuildForm(request.POST)
    if not form.is_valid():
        return _recipe_page(request, image, form=form, status=400)
    principal, membership = acting(request)
    try:
        built = services.image_build(
            principal=principal, membership=membership, actor=request.user, **form.cleaned_data
        )
    except errors.InstanceError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return _recipe_page(request, image, form=form, status=409 if isinstance(exc, errors.ImageExists) else 400)
    messages.success(request, _("Building %(name)s:%(tag)s.") % {"name": built.name, "tag": built.tag})
    return redirect("image_recipe", slug=built.slug)


IMAGE_ACTIONS = ("rename", "share", "unshare", "delete")


@login_required
@require_POST
def image_change(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    """Rename, share, stop sharing or delete a saved image from the Images page: the API's services."""
    try:
        require_view(request)
    except errors.NotPermitted:
        raise Http404 from None  # a role that shows no images: as if there were none
    principal, membership = acting(request)
    image = get_object_or_404(
        images_saved_for(principal=principal, membership=membership, user=request.user), slug=slug
    )
    if image_access(image=image, membership=membership, user=request.user) != Access.OPERATE:
        return _forbidden(
            request, errors.NotPermitted(_("Only the member who saved this image and the team's admins may change it."))
        )
    try:
        if action == "rename":
            form = ImageRenameForm(request.POST)
            if not form.is_valid():
                messages.error(request, _("Give the image a name of at most 64 characters."))
                return redirect("images")
            services.image_rename(image=image, **form.cleaned_data)
            messages.success(request, _("Saved."))
        elif action in ("share", "unshare"):
            services.image_share(image=image, shared=action == "share", actor=request.user)
            messages.success(
                request, _("Shared with the team.") if action == "share" else _("No longer shared with the team.")
            )
        else:
            services.image_delete(image=image, actor=request.user)
            messages.success(request, _("%(name)s:%(tag)s was deleted.") % {"name": image.name, "tag": image.tag})
    except errors.InstanceError as exc:
        messages.error(request, exc.message)
    return redirect("images")


# --- Snapshots of the disk, and clones ---------------------------------------------------------------------

SNAPSHOT_ACTIONS = ("restore", "delete")


def _snapshots_context(instance: Instance) -> dict:
    """The instance page's Snapshots card: its live snapshots (two queries), its schedule, the forms, and
    whether its region snapshots at all (read from the provider's class, never asked)."""
    if instance.status == Instance.Status.RELEASED:
        return {"snapshots": [], "snapshots_supported": False}
    rows = list(instance.snapshots.filter(status__in=Snapshot.LIVE).select_related("created_by"))
    schedule = SnapshotSchedule.objects.filter(instance=instance).first()
    return {
        "snapshots": rows,
        "snapshots_busy": any(row.busy for row in rows),
        "snapshots_supported": services.snapshots_supported(instance),
        "snapshot_schedule": schedule,
        "snapshot_form": SnapshotCreateForm(),
        "snapshot_schedule_form": SnapshotScheduleForm(
            initial={"every_hours": schedule.every_hours, "keep": schedule.keep} if schedule else {"every_hours": 0}
        ),
        "snapshot_price_fen": settings.INSTANCES_SNAPSHOT_PRICE_FEN_PER_GB_DAY,
        "clone_form": CloneForm(initial={"name": f"{instance.name}-clone"[:64]}),
    }


@instance_form_change(
    form=lambda request, instance: SnapshotCreateForm(request.POST),
    invalid=gettext_lazy("A snapshot's name is at most 64 characters."),
)
def instance_snapshot_create(request: HttpRequest, instance: Instance, data: dict) -> str:
    """The instance page's "Take a snapshot": the same service as ``POST …/snapshots/`` in the API."""
    snapshot = services.snapshot_create(instance=instance, actor=request.user, label=data["name"])
    return _("Taking snapshot %(name)s: its progress shows below.") % {"name": snapshot.label}


@instance_form_change(
    form=lambda request, instance: SnapshotScheduleForm(request.POST),
    invalid=gettext_lazy("Every 0 to 168 hours, keeping 1 or more."),
)
def instance_snapshot_schedule(request: HttpRequest, instance: Instance, data: dict) -> str:
    schedule = services.snapshot_schedule_set(instance=instance, every_hours=data["every_hours"], keep=data["keep"])
    if schedule is None:
        return _("Scheduled snapshots are off.")
    return _("A snapshot every %(hours)d hours, keeping the last %(keep)d.") % {
        "hours": schedule.every_hours,
        "keep": schedule.keep,
    }


@login_required
@require_POST
def instance_clone(request: HttpRequest, pk) -> HttpResponse:
    """The instance page's "Clone": the same service as ``POST …/clone/`` in the API; opens the new one."""
    instance = _operable(request, pk)
    if isinstance(instance, HttpResponse):
        return instance
    form = CloneForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("A name is at most 64 characters."))
        return redirect("instance_detail", pk=instance.pk)
    try:
        require_launch(request)
        snapshot = None
        if form.cleaned_data["snapshot"]:
            snapshot = instance.snapshots.filter(slug=form.cleaned_data["snapshot"]).first()
            if snapshot is None:
                raise Http404
        clone = services.instance_clone(
            instance=instance, actor=request.user, name=form.cleaned_data["name"], snapshot=snapshot
        )
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    except errors.InstanceError as exc:
        messages.error(request, exc.message)
        return redirect("instance_detail", pk=instance.pk)
    messages.success(request, _("Cloning %(name)s: its disk is copied, then it boots.") % {"name": instance.name})
    return redirect("instance_detail", pk=clone.pk)


@login_required
@require_POST
def snapshot_change(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    """Restore or delete a snapshot from its instance's page: the API's services."""
    principal, _membership = acting(request)
    try:
        require_view(request)
    except errors.NotPermitted:
        raise Http404 from None
    visible = selectors.instance_list_for(user=principal, include_released=True).values("pk")
    snapshot = get_object_or_404(
        Snapshot.objects.select_related("instance").filter(
            owner=principal, instance__in=visible, status__in=Snapshot.LIVE
        ),
        slug=slug,
    )
    try:
        require_operate(request, snapshot.instance)
    except errors.NotPermitted as exc:
        return _forbidden(request, exc)
    try:
        if action == "restore":
            services.snapshot_restore(snapshot=snapshot, actor=request.user)
            messages.success(
                request, _("Restoring %(name)s: start the instance once it is done.") % {"name": snapshot.label}
            )
        else:
            services.snapshot_delete(snapshot=snapshot, actor=request.user)
            messages.success(request, _("Snapshot %(name)s deleted.") % {"name": snapshot.label})
    except errors.InstanceError as exc:
        messages.error(request, exc.message)
    return redirect(f"{reverse('instance_detail', args=[snapshot.instance_id])}#snapshots")
