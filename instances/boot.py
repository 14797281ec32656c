"""Where a boot has got to: the stages a provider's polls report, when each was first seen, and the
image pull's progress, for the instance page's launch timeline.

The worker records (``boot_observe``, called where a poll is applied: ``services.sync._instance_observe``);
the page reads what was recorded (``boot_timeline``), never the provider. A boot begins when the
instance enters provisioning, starting or restarting (``since``: that status's ``status_changed_at``);
its "queued" stage starts then, whatever the provider says, and each later stage lasts until the next
one was first seen, the last one until the machine ran (``running_since``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Func, JSONField, Value
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.formatting import duration
from instances.models import Image, Instance, Node
from providers.base import BOOT_FAILED, BOOT_STAGES, Observation, image_cache_key

S = Instance.Status
BOOTING = (S.PROVISIONING, S.STARTING, S.RESTARTING)
STAGE_LABELS = {
    "queued": _("Queued"),
    "placed": _("Placed on a node"),
    "pulling": _("Pulling the image"),
    "image_ready": _("Image ready"),
    "container_started": _("Container started"),
    "servers_answering": _("Servers answering"),
}


def boot_changes(*, instance: Instance, observation: Observation, now: datetime | None = None) -> dict:
    """The fields a poll's ``stage`` and pull progress change on ``instance`` (empty: nothing new).

    Only while it boots; a stage is recorded the first time it is seen (a later report of an earlier
    stage changes nothing), so each duration is what the provider showed, not a guess.
    """
    stage = observation.stage
    if instance.status not in BOOTING or stage not in BOOT_STAGES:
        return {}
    now = now or timezone.now()
    since = instance.status_changed_at.isoformat()
    current = instance.boot_stages or {}
    if current.get("since") != since:  # a new boot: the last one's stages are history
        current = {"since": since, "seen": {"queued": since}}
        pull: dict = {}
    else:
        pull = dict(instance.boot_pull or {})
    seen = dict(current.get("seen") or {})
    changes: dict = {}
    if stage not in seen:
        seen[stage] = now.isoformat()
    if seen != current.get("seen") or current is not instance.boot_stages:
        changes["boot_stages"] = {"since": since, "seen": seen}
    if stage == "pulling" and (observation.pull_bytes_done or observation.pull_bytes_total):
        done, total = max(0, observation.pull_bytes_done), max(0, observation.pull_bytes_total)
        if done != pull.get("done") or total != pull.get("total"):
            changes["boot_pull"] = {
                "done": done,
                "total": total,
                "at": now.isoformat(),
                # The reading before, for the rate now (falls back to the stage's start).
                "prev_done": pull.get("done", 0),
                "prev_at": pull.get("at") or seen["pulling"],
            }
    elif "boot_stages" in changes and not pull and instance.boot_pull:
        changes["boot_pull"] = {}
    return changes


def boot_failed(observation: Observation) -> bool:
    """Whether the provider says this boot cannot succeed (its image could not be pulled, its container
    would not start): the instance is then settled with ``observation.detail`` as its reason."""
    return observation.stage == BOOT_FAILED


def node_image_cached(*, instance: Instance) -> None:
    """The image of ``instance`` is on its node now (its boot got past the pull): the launch page says
    so at once, before the next ``nodes_sync`` brings the provider's own list. One conditional update."""
    if not instance.node_id:
        return
    key = image_cache_key(image_ref=instance.image_ref, image=instance.image.slug)
    Node.objects.filter(pk=instance.node_id).exclude(cached_images__contains=[key]).update(
        cached_images=_JsonAppend("cached_images", Value([key], output_field=JSONField()))
    )


class _JsonAppend(Func):
    """``jsonb || jsonb``: a list with more items, in the row's own update (no read first)."""

    arg_joiner = " || "
    template = "%(expressions)s"
    output_field = JSONField()


def seconds_text(seconds: float | None) -> str:
    """A stage's length as the timeline shows it: tenths under a minute (``2.4 s``), else ``3 min``."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return gettext("%(s).1f s") % {"s": seconds}
    return duration(seconds)


@dataclass(frozen=True)
class Stage:
    key: str
    label: str
    started_at: datetime
    seconds: float | None  # None: it is the stage the boot is in now (or where it failed)
    current: bool
    failed: bool = False  # the boot ended here without running

    @property
    def took(self) -> str:
        return seconds_text(self.seconds)


@dataclass(frozen=True)
class Pull:
    done: int
    total: int
    percent: int
    rate_bytes_s: float | None
    seconds_left: float | None

    @property
    def left(self) -> str:
        return seconds_text(self.seconds_left)


@dataclass(frozen=True)
class Timeline:
    stages: list[Stage]
    pull: Pull | None  # while the image is being pulled
    total_seconds: float | None  # from the request to running, once it ran

    @property
    def took(self) -> str:
        return seconds_text(self.total_seconds)


def _when(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None


def boot_timeline(*, instance: Instance) -> Timeline | None:
    """The launch timeline the page shows, from what the worker recorded; None when no provider
    reported a stage for the current (or last) boot."""
    record = instance.boot_stages or {}
    seen = {k: _when(v) for k, v in (record.get("seen") or {}).items() if k in BOOT_STAGES}
    if len(seen) < 2:
        return None
    order = [k for k in BOOT_STAGES if k in seen]
    booting = instance.status in BOOTING
    ended = instance.running_since if instance.running_since and instance.running_since >= seen[order[0]] else None
    stages = []
    for index, key in enumerate(order):
        start = seen[key]
        end = seen[order[index + 1]] if index + 1 < len(order) else ended
        current = end is None and booting
        stages.append(
            Stage(
                key=key,
                label=str(STAGE_LABELS[key]),
                started_at=start,
                seconds=max(0.0, (end - start).total_seconds()) if end else None,
                current=current,
                failed=end is None and not booting and instance.status != S.RUNNING,
            )
        )
    pull = None
    progress = instance.boot_pull or {}
    if booting and order[-1] == "pulling" and progress.get("total"):
        done, total = int(progress["done"]), int(progress["total"])
        at, prev_at = _when(progress.get("at")), _when(progress.get("prev_at"))
        rate = None
        if at and prev_at and at > prev_at and done > int(progress.get("prev_done", 0)):
            rate = (done - int(progress.get("prev_done", 0))) / (at - prev_at).total_seconds()
        pull = Pull(
            done=done,
            total=total,
            percent=min(100, int(done * 100 / total)),
            rate_bytes_s=rate,
            seconds_left=max(0.0, (total - done) / rate) if rate else None,
        )
    total_seconds = (ended - seen[order[0]]).total_seconds() if ended else None
    return Timeline(stages=stages, pull=pull, total_seconds=total_seconds)


def image_contents(image: Image) -> list[tuple[str, str]]:
    """What the launch page lists for an image: (label, version) for Python, CUDA and the framework,
    as its build recorded them (``Image.contents``), else as the catalogue names them."""
    contents = image.contents or {}
    python = contents.get("python") or image.python_version
    cuda = contents.get("cuda") or image.cuda_version
    framework = image.framework
    version = (
        contents.get(framework.lower())
        or contents.get("torch" if framework == "PyTorch" else "")
        or (image.framework_version)
    )
    rows = []
    if python:
        rows.append(("Python", python))
    if cuda:
        rows.append(("CUDA", cuda))
    if framework and framework not in ("CUDA", "Python") and version:
        rows.append((framework, version))
    return rows
