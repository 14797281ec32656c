"""Auto-stop: a time to stop at, or a number of idle minutes judged from the stored GPU samples; the
owner is warned first (and may snooze), then the instance is stopped like any other.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.messages import reason as stored
from instances.errors import LaunchInvalid
from instances.hooks import gpu_metrics_hooks
from instances.lifecycle import instance_notify
from instances.models import Instance
from instances.services.common import S, _refuse
from instances.services.operations import instance_stop
from notifications.models import Kind
from notifications.services import Message, notify
from providers import BackendError, backend_aliases, get_backend


def instances_experiment_runs_refresh() -> int:
    """Save each running instance's W&B runs as its provider reads them off its disk (``experiment_runs``),
    where the page and the API read them. Only providers that read them are asked (``reads_experiment_runs``:
    this host, Slurm), and a row is written only when its runs changed. Returns how many changed.

    Here beside idle auto-stop: both are the worker's periodic look at what a running machine does."""
    changed = 0
    for alias in backend_aliases():
        backend = get_backend(alias)
        if not backend.reads_experiment_runs:
            continue
        running = Instance.objects.filter(status=Instance.Status.RUNNING, backend_alias=alias).order_by()
        for pk, state, saved in running.values_list("pk", "backend_state", "experiment_runs"):
            try:
                runs = backend.experiment_runs(key=str(pk), state=state)  # the provider's name: ``Instance.key``
            except BackendError:
                continue  # asked again at the next pass
            if runs != saved:
                changed += Instance.objects.filter(pk=pk).update(experiment_runs=runs)
    return changed


def instance_auto_stop_set(
    *, instance: Instance, at: datetime | None = None, idle_minutes: int | None = None
) -> Instance:
    """Stop automatically at ``at`` and/or after ``idle_minutes`` of idle GPUs; ``None`` clears a rule."""
    if at is not None and at <= timezone.now():
        raise LaunchInvalid(_("Choose a time in the future."), field="auto_stop_at")
    if idle_minutes is not None and not (5 <= idle_minutes <= 7 * 24 * 60):
        raise LaunchInvalid(_("Idle minutes must be between 5 and 10080."), field="auto_stop_idle_minutes")
    if instance.status in (S.RELEASING, S.RELEASED, S.FAILED, S.LOST):
        _refuse(instance, _("An instance that is %(status)s cannot have an auto-stop timer."))
    Instance.objects.filter(pk=instance.pk).update(auto_stop_at=at, auto_stop_idle_minutes=idle_minutes)
    instance.auto_stop_at, instance.auto_stop_idle_minutes = at, idle_minutes
    transaction.on_commit(lambda: instance_notify(instance))
    return instance


def instances_auto_stop(*, now: datetime | None = None) -> int:
    """Periodic: stop instances whose stop time has come or that nobody has used for long enough.

    Use is judged twice, and any sign of it counts (the shorter idle time wins): by the provider
    (GPU work, and on this host also notebooks, SSH and VS Code sessions) and by the GPU samples the
    console stored (``hooks.gpu_metrics``), which is what makes idle stop work on engines
    whose provider reports no use (Kubernetes). A Slurm job reports its servers' last use in its report,
    so a run there without GPU samples (no-GPU mode) is judged too. Neither knowing: not stopped."""
    now = now or timezone.now()
    stopped = 0
    due = Instance.objects.select_related("owner").filter(status=S.RUNNING, auto_stop_at__lte=now)
    for instance in due:
        instance_stop(instance=instance, reason=stored(gettext_noop("Auto-stop: the scheduled time was reached")))
        Instance.objects.filter(pk=instance.pk).update(auto_stop_at=None)
        stopped += 1
    candidates = list(
        Instance.objects.select_related("owner", "created_by").filter(
            status=S.RUNNING, auto_stop_idle_minutes__isnull=False
        )
    )
    from_samples = (
        gpu_metrics_hooks().gpu_idle_seconds(running_since={i.pk: i.running_since for i in candidates}, now=now)
        if candidates
        else {}
    )
    for instance in candidates:
        observation = get_backend(instance.backend_alias).poll(key=instance.key, state=instance.backend_state)
        known = [s for s in (observation.idle_seconds, from_samples.get(instance.pk)) if s is not None]
        if not known:
            continue
        idle = min(known)
        if instance.auto_stop_snoozed_at is not None:
            idle = min(idle, int((now - instance.auto_stop_snoozed_at).total_seconds()))
        limit = instance.auto_stop_idle_minutes * 60
        if idle >= limit:
            instance_stop(
                instance=instance,
                reason=stored(gettext_noop("Auto-stop: idle for %(m)d minutes"), m=instance.auto_stop_idle_minutes),
            )
            Instance.objects.filter(pk=instance.pk).update(auto_stop_warned_at=None, auto_stop_snoozed_at=None)
            _idle_stopped_notify(instance=instance)
            stopped += 1
        elif idle >= limit - _auto_stop_warning_s(limit):
            if instance.auto_stop_warned_at is None:
                _auto_stop_warn(instance=instance, seconds_left=limit - idle, now=now)
        elif instance.auto_stop_warned_at is not None:
            # Used again since the warning: the next idle stretch gets a warning of its own.
            Instance.objects.filter(pk=instance.pk).update(auto_stop_warned_at=None)
    return stopped


def _idle_stopped_notify(*, instance: Instance) -> None:
    values = {"name": instance.name, "m": instance.auto_stop_idle_minutes}
    notify(
        user=instance.owner,
        kind=Kind.IDLE_STOPPED,
        render=lambda: Message(
            title=_("%(name)s was stopped: idle for %(m)d minutes") % values,
            body=_(
                "Auto-stop stopped your instance %(name)s after %(m)d idle minutes. Its disk is kept; start it again from its page."
            )
            % values,
        ),
        link=f"/instances/{instance.pk}/",
        data={"instance_id": str(instance.pk), "instance_name": instance.name, "idle_minutes": values["m"]},
        actor=instance.created_by,
    )


def _auto_stop_warning_s(limit_s: int) -> int:
    """How long before an idle stop its owner is warned: ``INSTANCES_AUTO_STOP_WARNING_S``, at most
    half the idle limit (a 5-minute rule warns after 2.5 minutes)."""
    return min(getattr(settings, "INSTANCES_AUTO_STOP_WARNING_S", 600), limit_s // 2)


def _auto_stop_warn(*, instance: Instance, seconds_left: int, now: datetime) -> None:
    """Tell the owner (e-mail, and a notice on any open console page) that an idle stop is near, with
    the way to keep it running: a long job the console cannot see (a detached process, a download)
    must not be cut off without a word."""
    if not Instance.objects.filter(pk=instance.pk, auto_stop_warned_at__isnull=True).update(auto_stop_warned_at=now):
        return  # another worker warned first
    minutes = max(1, round(seconds_left / 60))
    values = {"name": instance.name, "m": minutes}
    notify(
        user=instance.owner,
        kind=Kind.IDLE_WARNING,
        render=lambda: Message(
            title=_("%(name)s will stop in %(m)d minutes: nobody is using it") % values,
            body=_(
                "Your instance %(name)s has been idle, so auto-stop will stop it in about %(m)d minutes "
                "(its disk is kept). To keep it running, press “Keep running” on its page or use it."
            )
            % values,
        ),
        link=f"/instances/{instance.pk}/",
        data={"instance_id": str(instance.pk), "instance_name": instance.name, "minutes_left": minutes},
        actor=instance.created_by,
    )
    transaction.on_commit(lambda: instance_notify(instance))


def instance_auto_stop_snooze(*, instance: Instance) -> Instance:
    """ "Keep running": the idle clock starts again now, and the warning is withdrawn."""
    if instance.status != S.RUNNING:
        _refuse(instance, _("An instance that is %(status)s is not counting idle time."))
    now = timezone.now()
    Instance.objects.filter(pk=instance.pk).update(auto_stop_snoozed_at=now, auto_stop_warned_at=None)
    instance.auto_stop_snoozed_at, instance.auto_stop_warned_at = now, None
    transaction.on_commit(lambda: instance_notify(instance))
    return instance
