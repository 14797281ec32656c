"""The GPU catalogue (regions, GPU models, images), nodes, instances and their history, GPU quota."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.messages import shown
from core.status import EventReasonMixin, StatusDisplayMixin


class Region(models.Model):
    """A place where GPUs live, served by one provisioning backend (see PROVISIONING_BACKENDS)."""

    slug = models.SlugField(unique=True)
    name = models.CharField(_("name"), max_length=64)
    backend_alias = models.CharField(_("backend"), max_length=32, default="default")
    is_active = models.BooleanField(_("active"), default=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("region")
        verbose_name_plural = _("regions")

    def __str__(self) -> str:
        return self.name


class GpuModel(models.Model):
    """A GPU model offered for rent, priced per card-hour in fen (1/100 CNY)."""

    slug = models.SlugField(unique=True)
    name = models.CharField(_("name"), max_length=64)
    vendor = models.CharField(_("vendor"), max_length=32, default="NVIDIA")
    memory_gb = models.PositiveIntegerField(_("memory (GB)"))
    price_per_card_hour_fen = models.PositiveIntegerField(_("price per card-hour (fen)"))
    # The interruptible ("spot") tier's price: cheaper because the card can be taken back for on-demand
    # work. None: half the on-demand price (``spot_price_fen``), so a model added in the admin has one.
    spot_price_per_card_hour_fen = models.PositiveIntegerField(
        _("interruptible price per card-hour (fen)"), null=True, blank=True
    )
    cpu_cores_per_card = models.PositiveIntegerField(_("CPU cores per card"), default=12)
    ram_gb_per_card = models.PositiveIntegerField(_("RAM (GB) per card"), default=90)
    sort_order = models.PositiveIntegerField(default=0)
    is_active = models.BooleanField(_("active"), default=True)

    class Meta:
        ordering = ["sort_order", "name"]
        verbose_name = _("GPU model")
        verbose_name_plural = _("GPU models")

    def __str__(self) -> str:
        return self.name

    @property
    def spot_price_fen(self) -> int:
        """The interruptible tier's card-hour price: the catalogue's, or half the on-demand one (rounded up)."""
        if self.spot_price_per_card_hour_fen is not None:
            return self.spot_price_per_card_hour_fen
        return (self.price_per_card_hour_fen + 1) // 2

    def card_hour_price_fen(self, tier: str) -> int:
        """The card-hour price of ``tier`` (an ``Instance.Tier``)."""
        return self.spot_price_fen if tier == Instance.Tier.INTERRUPTIBLE else self.price_per_card_hour_fen


class Image(models.Model):
    """A system image an instance boots from: a framework, its version and the CUDA it was built for.

    Either the catalogue's (``owner`` null: offered to everyone while ``is_active``), one an account
    saved from an instance (``owner`` set: "Save as image", ``instances.images``), or one it imported
    from a registry the operator allows (``owner`` and ``imported_from`` set: "Bring your own image";
    not billed for storage, as the console keeps no copy but the nodes' cache). A saved image is
    never in the catalogue (``is_active`` false): only its owner sees it, and on a team's account the
    member who saved it and the team's admins, or every member once it is ``shared``. It is billed per
    GB-day while it exists (``image_meter_ref``); deleting it keeps the row (instances that ran it point
    at it) with status DELETED.
    """

    class Status(models.TextChoices):
        SAVING = "saving", _("Saving")  # the machine is being committed and pushed
        BUILDING = "building", _("Building")  # the console's builder is building it from a recipe
        READY = "ready", _("Ready")  # in the registry: launchable, billed
        FAILED = "failed", _("Failed")  # the save did not finish: ``status_reason`` says why; not billed
        DELETED = "deleted", _("Deleted")  # gone from the owner's list and the bill

    slug = models.SlugField(unique=True)
    name = models.CharField(_("name"), max_length=96)
    framework = models.CharField(_("framework"), max_length=32)
    framework_version = models.CharField(_("framework version"), max_length=32, blank=True)
    cuda_version = models.CharField(_("CUDA version"), max_length=16)
    python_version = models.CharField(_("Python version"), max_length=16, blank=True)
    os = models.CharField(_("operating system"), max_length=32, default="Ubuntu 22.04")
    sort_order = models.PositiveIntegerField(default=0)
    is_active = models.BooleanField(_("active"), default=True)
    # The OCI image behind it, as published to the console's registry (``make images``): the
    # repository and tag it was pushed as, and the digest that tag named then. A launch pins the digest.
    repository = models.CharField(_("repository"), max_length=200, blank=True)
    tag = models.CharField(_("tag"), max_length=128, blank=True)
    digest = models.CharField(_("digest"), max_length=80, blank=True)
    size_bytes = models.PositiveBigIntegerField(_("size (bytes)"), default=0)
    # What is inside, as the build recorded it: {"python": "3.11.2", "cuda": "12.4", "torch": "2.5.1", …}.
    contents = models.JSONField(_("contents"), default=dict, blank=True)
    # A saved image's: the account it belongs to (a person's, or a team's), who saved it and from which
    # instance, the owner's note, whether the team sees it, and where its save has got to.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="owned_images",
        verbose_name=_("owner"),
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("saved by"),
    )
    source_instance = models.ForeignKey(
        "instances.Instance",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="saved_images",
        verbose_name=_("saved from"),
    )
    note = models.CharField(_("note"), max_length=500, blank=True)
    shared = models.BooleanField(_("shared with the team"), default=False)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.READY)
    # A stored message (core.messages): why a save failed.
    status_reason = models.TextField(_("reason"), blank=True)
    # An image an account brought ("Bring your own image", ``instances.services.image_import``): the
    # reference it was imported from, the platform its registry reported, and whether its config says it
    # follows the console's image contract (else the console mounts its start script at launch). Empty
    # and None for the catalogue's and saved images.
    imported_from = models.CharField(_("imported from"), max_length=300, blank=True)
    platform = models.CharField(_("platform"), max_length=64, blank=True)
    follows_contract = models.BooleanField(_("follows the image contract"), null=True, blank=True)
    # The Containerfile that rebuilds it (``providers.local.runtime.image_recipe``): read off the saved
    # layer at a save, or the recipe it was built from (``instances.services.image_build``). Empty where
    # the provider could not read one.
    recipe = models.TextField(_("recipe"), blank=True)
    # A build's log as it goes (its tail, ``INSTANCES_IMAGE_BUILD_LOG_BYTES`` at most); empty for saves.
    build_log = models.TextField(_("build log"), blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        ordering = ["sort_order", "name"]
        verbose_name = _("image")
        verbose_name_plural = _("images")
        constraints = [
            # One live image per name and tag in an account's repository (a deleted one frees its name).
            models.UniqueConstraint(
                fields=["owner", "name", "tag"],
                condition=models.Q(owner__isnull=False) & ~models.Q(status="deleted"),
                name="instances_image_owner_name_tag",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def pinned_ref(self) -> str:
        """``repository@digest`` when the image is published, else ``repository:tag``, else ""."""
        if not self.repository:
            return ""
        if self.digest:
            return f"{self.repository}@{self.digest}"
        return f"{self.repository}:{self.tag or 'latest'}"

    @property
    def status_reason_text(self) -> str:
        """Why a save failed, in the reader's language."""
        return shown(self.status_reason)

    @property
    def cache_key(self) -> str:
        """How a node's image cache names it (``providers.base.image_cache_key``): its digest once
        published, its slug before."""
        return self.digest or self.slug


class TenantRange(models.Model):
    """An account's own Unix uid and host uid range, allocated once and never reused (``instances.tenancy``)."""

    account = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tenant_range")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("tenant uid range")
        verbose_name_plural = _("tenant uid ranges")

    def __str__(self) -> str:
        return f"tenant {self.pk} ({self.account_id})"


# --- Capacity as the provisioning backends report it -----------------------------------------------


class Node(models.Model):
    """A host with GPUs of one model, as its backend reports it; the unit of placement.

    ``total_cards`` comes from the backend (``nodes_sync``); ``free_cards`` is the console's own count
    of cards not held by an instance, taken and given back with conditional updates
    (``free_cards = free_cards - n WHERE free_cards >= n``), so two launches can never share a card.
    """

    backend_alias = models.CharField(_("backend"), max_length=32)
    name = models.CharField(_("name"), max_length=96)
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="nodes")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="nodes")
    total_cards = models.PositiveSmallIntegerField(_("cards"))
    free_cards = models.SmallIntegerField(_("free cards"))
    is_healthy = models.BooleanField(_("healthy"), default=True)
    # The provider's own count where it schedules by itself (Slurm: cards not held by any job, the
    # console's or not); None where the console's reservations are the whole truth (the simulated cloud).
    provider_free_cards = models.SmallIntegerField(_("free cards (provider)"), null=True, blank=True)
    # Why it is out of service, in the provider's words ("down", "drain", "NotReady"…), or that the
    # provider stopped reporting it; empty while healthy.
    health_detail = models.CharField(_("health detail"), max_length=128, blank=True)
    health_changed_at = models.DateTimeField(_("health changed"), null=True, blank=True)
    # The network block it sits in (a leaf switch, an InfiniBand island), as the provider reports it:
    # a cluster is placed in as few blocks as it fits in (``instances.capacity.takeback.gang_reserve``). Empty:
    # the provider does not say, and all its nodes count as one block.
    block = models.CharField(_("network block"), max_length=64, blank=True)
    last_seen_at = models.DateTimeField(_("last seen"), default=timezone.now)
    # The images this node holds, as its provider last reported them (``NodeInfo.images``: digests, or
    # slugs for images never published) and as launches pulled them since: the launch page reads this
    # to say "cached on this node", never the provider (``nodes_sync`` refreshes it).
    cached_images = models.JSONField(_("cached images"), default=list, blank=True)

    class Meta:
        ordering = ["region", "gpu_model", "name"]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")
        constraints = [
            models.UniqueConstraint(fields=["backend_alias", "name"], name="instances_node_unique_name"),
            # The last line of defence against oversubscription: a bug cannot hand out a card twice.
            models.CheckConstraint(
                condition=models.Q(free_cards__gte=0) & models.Q(free_cards__lte=models.F("total_cards")),
                name="instances_node_free_cards_in_range",
            ),
        ]
        # Best fit in index order (free cards, then name): the one-statement take reads one index entry
        # instead of sorting every node of the model (5.8 ms → 0.1 ms on 1,024 nodes).
        indexes = [models.Index(fields=["region", "gpu_model", "free_cards", "name"], name="instances_node_best_fit")]

    def __str__(self) -> str:
        return self.name


# --- Instances ----------------------------------------------------------------------------------------


class Instance(StatusDisplayMixin, models.Model):
    """A GPU machine a user rents. Its UUID is the provider-side name, so retries find, never duplicate.

    ``status`` only changes through ``instances.lifecycle.instance_transition`` (compare-and-set plus an
    event row); ``backend_state`` is opaque to the console and owned by the region's backend.
    """

    class Status(models.TextChoices):
        REQUESTED = "requested", _("Requested")  # accepted by the console; nothing placed yet
        SCHEDULING = "scheduling", _("Scheduling")  # choosing a node with enough free cards
        PROVISIONING = "provisioning", _("Provisioning")  # cards reserved; the backend creates and boots it
        RUNNING = "running", _("Running")  # up and billed per second for its GPUs
        RESTARTING = "restarting", _("Restarting")  # rebooting on the same node; GPUs kept (and billed)
        STOPPING = "stopping", _("Stopping")  # shutting down; GPUs are freed when it is stopped
        STOPPED = "stopped", _("Stopped")  # GPUs freed; the disk is kept and billed as storage
        STARTING = "starting", _("Starting")  # placed again on a node; the backend boots it
        RELEASING = "releasing", _("Releasing")  # being destroyed with its disk
        RELEASED = "released", _("Released")  # gone for good; nothing is billed
        FAILED = "failed", _("Failed")  # could not be created; nothing was billed
        LOST = "lost", _("Lost")  # the backend no longer has it (a node failed); billing closed
        # Interruptible only: its cards were taken for on-demand work. The grace period runs (its
        # checkpoint command with it); billing stopped at the second of preemption.
        PREEMPTING = "preempting", _("Preempting")
        PREEMPTED = "preempted", _("Preempted")  # powered off, disk kept, queued to restart by itself

    class Tier(models.TextChoices):
        ON_DEMAND = "on-demand", _("On-demand")  # keeps its cards until its owner lets them go
        INTERRUPTIBLE = "interruptible", _("Interruptible")  # cheaper; preempted for on-demand work

    BADGE_COLOURS = {
        Status.REQUESTED: "blue",
        Status.SCHEDULING: "blue",
        Status.PROVISIONING: "blue",
        Status.RUNNING: "green",
        Status.RESTARTING: "yellow",
        Status.STOPPING: "yellow",
        Status.STOPPED: "",
        Status.STARTING: "blue",
        Status.RELEASING: "yellow",
        Status.RELEASED: "",
        Status.FAILED: "red",
        Status.LOST: "red",
        Status.PREEMPTING: "yellow",
        Status.PREEMPTED: "yellow",
    }
    # States in which the instance holds cards on a node (they count against quota and capacity).
    HOLDING_GPUS = (
        Status.REQUESTED,
        Status.SCHEDULING,
        Status.PROVISIONING,
        Status.RUNNING,
        Status.RESTARTING,
        Status.STOPPING,
        Status.STARTING,
    )
    # States that end with a worker's action: shown with a spinner, watched by the reconciler.
    BUSY = (
        Status.REQUESTED,
        Status.SCHEDULING,
        Status.PROVISIONING,
        Status.RESTARTING,
        Status.STOPPING,
        Status.STARTING,
        Status.RELEASING,
        Status.PREEMPTING,
    )
    GPU_COUNTS = (1, 2, 4, 8)
    # Nodes of a multi-node cluster; settings.INSTANCES_MAX_NODES caps which of these are offered.
    NODE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # up to 1,024 nodes × 8 = 8,192 cards

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="instances")
    # The person who launched it: the owner on a personal account, the member on a team's (whose own
    # limits it counts against, and who may operate it while a member who may launch: ``teams.access``).
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("launched by"),
    )
    name = models.CharField(_("name"), max_length=64)
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="instances")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="instances")
    gpu_count = models.PositiveSmallIntegerField(_("GPUs"))  # per node
    # Nodes the instance spans (a multi-node cluster), each with ``gpu_count`` cards; 1: one machine.
    node_count = models.PositiveSmallIntegerField(_("nodes"), default=1)
    image = models.ForeignKey(Image, on_delete=models.PROTECT, related_name="instances")
    # The image's OCI reference as it was at launch, pinned by digest (``Image.pinned_ref``): every start
    # boots this one, whatever the tag names since.
    image_ref = models.CharField(_("image reference"), max_length=300, blank=True)
    disk_gb = models.PositiveIntegerField(_("disk (GB)"))
    ssh_keys = models.ManyToManyField("accounts.SSHKey", blank=True, related_name="instances")
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.REQUESTED)
    # A stored message (core.messages): translated into the reader's language when shown.
    status_reason = models.TextField(_("reason"), blank=True)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.PROTECT, related_name="instances")
    # The names of a cluster's other nodes (``node`` is its head), each holding ``gpu_count`` cards.
    # Cleared in the same compare-and-set as ``node`` when the cards go back, so they go back once.
    extra_nodes = models.JSONField(_("other nodes"), default=list, blank=True)
    backend_alias = models.CharField(_("backend"), max_length=32)
    backend_state = models.JSONField(_("backend state"), default=dict, blank=True)
    # The app the machine serves (a one-click deployment's server): ``backends.AppLaunch`` as a dict,
    # empty for a plain instance. Kept here so every start and restart boots the current one.
    app_launch = models.JSONField(_("app"), default=dict, blank=True)
    # The current (or last) run is without cards (no-GPU mode: the same disk and image, a small CPU/RAM
    # allowance, ``INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR``): set by a no-GPU start, cleared by a normal one.
    # ``gpu_count`` stays what the next GPU start takes; ``cards_held`` is what this run holds.
    no_gpu = models.BooleanField(_("without GPU"), default=False)
    # The W&B runs its programs started, newest first, as the worker last read them off its disk
    # (``instances_experiment_runs_refresh``): pages and the API read this, never the provider.
    experiment_runs = models.JSONField(_("W&B runs"), default=list, blank=True)
    # The price per hour when running, fixed at launch for display (billing keeps its own copy).
    hourly_price_fen = models.PositiveIntegerField(_("price per hour (fen)"))
    tier = models.CharField(_("tier"), max_length=16, choices=Tier.choices, default=Tier.ON_DEMAND)
    # Run on the machine when it is about to be preempted (interruptible tier), within the grace
    # period (``INSTANCES_PREEMPTION_GRACE_S``): e.g. ``python save.py /mnt/ckpt``. Empty: none.
    checkpoint_command = models.CharField(_("checkpoint command"), max_length=500, blank=True)
    # The on-demand instance this one's cards went to while it is PREEMPTING: that one waits to be
    # created until every machine it displaces is off (the provider would refuse a full node).
    preempted_for = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="displaced", editable=False
    )
    # Its cards were taken by preempting others at its last placement: its worker asks whether they
    # are off yet before creating or starting it. False (the usual case) spares every boot that query.
    displaced_others = models.BooleanField(default=False, editable=False)
    # The owner chose to wait in line for cards after a start was refused for lack of them, at this
    # moment: a STOPPED instance starts by itself when cards free up, first come first served per region
    # and model (``instances.capacity.start_queue``). Null: not in line; any move out of STOPPED clears it.
    start_queued_at = models.DateTimeField(_("waiting in line since"), null=True, blank=True)
    auto_stop_at = models.DateTimeField(_("stop at"), null=True, blank=True)
    auto_stop_idle_minutes = models.PositiveIntegerField(_("stop after idle minutes"), null=True, blank=True)
    # The owner was told an idle stop is near (once per idle stretch), and "Keep running" was pressed:
    # the idle clock then counts from that moment, whatever the provider says.
    auto_stop_warned_at = models.DateTimeField(_("idle stop warned"), null=True, blank=True)
    auto_stop_snoozed_at = models.DateTimeField(_("kept running"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now, db_index=True)
    status_changed_at = models.DateTimeField(_("status changed"), default=timezone.now)
    running_since = models.DateTimeField(_("running since"), null=True, blank=True)
    # How the owner reaches the running machine, as its provider last said (``backends.EntryPoints`` as a
    # dict: ``web``, ``ssh_port``, ``ssh_user``), and when. Saved by the worker as the machine boots and
    # by the reconciler (``instances.entry_points``); pages and the API read these, never the provider.
    # Asked before ``running_since``: they were an earlier boot's, and are not shown.
    entry_points = models.JSONField(_("entry points"), default=dict, blank=True)
    entry_points_at = models.DateTimeField(_("entry points asked"), null=True, blank=True)
    # The current (or last) boot, as the provider's polls reported it (``instances.boot``): when it began
    # (``since``) and when each of ``providers.base.BOOT_STAGES`` was first seen (``seen``), for the
    # instance page's launch timeline; and, while its image is pulled, the last two progress readings.
    boot_stages = models.JSONField(_("boot stages"), default=dict, blank=True)
    boot_pull = models.JSONField(_("image pull"), default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("instance")
        verbose_name_plural = _("instances")
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="instances_owner_recent"),
            models.Index(fields=["status"], name="instances_status"),
            # The line of queued starts: a few rows, read at every reconciler pass.
            models.Index(
                fields=["region", "gpu_model", "start_queued_at"],
                name="instances_start_queue",
                condition=models.Q(start_queued_at__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(gpu_count__in=(1, 2, 4, 8)), name="instances_gpu_count_valid"),
            models.CheckConstraint(
                condition=models.Q(node_count__in=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)),
                name="instances_node_count_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def total_gpus(self) -> int:
        """The cards billed and counted against quota: every node's."""
        return self.node_count * self.gpu_count

    @property
    def cards_held(self) -> int:
        """Cards this run takes on each of its nodes: ``gpu_count``, or 0 in no-GPU mode. Placement, the
        cards given back, the provider's spec and the meter read this, never ``gpu_count`` alone."""
        return 0 if self.no_gpu else self.gpu_count

    @property
    def billed_hourly_fen(self) -> int:
        """What a run in the current mode costs per hour: the cards' price, or the no-GPU price."""
        return self.no_gpu_hourly_fen if self.no_gpu else self.hourly_price_fen

    @property
    def no_gpu_hourly_fen(self) -> int:
        """What a start without GPU would cost per hour (the page offers it beside Start)."""
        return settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR

    def can_start_no_gpu(self) -> bool:
        # Only a stopped single machine: a cluster's nodes work together on their cards.
        return self.status == self.Status.STOPPED and self.node_count == 1

    @property
    def shape(self) -> str:
        """What the pages call it: "8 × H200", or "2 nodes × 8 × H200" for a cluster."""
        shape = f"{self.gpu_count} × {self.gpu_model.name}"
        if self.node_count > 1:
            return ngettext("%(n)d node × %(shape)s", "%(n)d nodes × %(shape)s", self.node_count) % {
                "n": self.node_count,
                "shape": shape,
            }
        return shape

    @property
    def node_names(self) -> list[str]:
        """Every node it holds cards on, the head first."""
        return ([self.node.name] if self.node_id and self.node else []) + list(self.extra_nodes or [])

    def can_start(self) -> bool:
        # A preempted one restarts by itself when capacity returns; its owner may also try now.
        return self.status in (self.Status.STOPPED, self.Status.PREEMPTED)

    def can_stop(self) -> bool:
        # Stopping a preempted one takes it out of the queue (its disk is then billed as storage).
        return self.status in (self.Status.RUNNING, self.Status.PREEMPTED)

    def can_restart(self) -> bool:
        return self.status == self.Status.RUNNING

    def can_release(self) -> bool:
        return self.status not in (self.Status.RELEASING, self.Status.RELEASED)


class InstanceSecret(models.Model):
    """A secret of the instance's owner (``vault.Secret``) that the machine gets at every boot: the file
    ``/run/console-secrets/<NAME>`` and, with ``env``, the variable ``NAME`` of its servers and log-in
    shells. The value is read (decrypted) only while the spec of a boot is built (``_spec``), so a
    choice or a new value takes effect at the next start or restart; nothing of it is stored here.
    """

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="secret_choices")
    secret = models.ForeignKey("vault.Secret", on_delete=models.CASCADE, related_name="instance_choices")
    env = models.BooleanField(_("also an environment variable"), default=False)

    class Meta:
        verbose_name = _("instance secret")
        verbose_name_plural = _("instance secrets")
        constraints = [models.UniqueConstraint(fields=["instance", "secret"], name="instances_secret_once")]

    def __str__(self) -> str:
        return f"{self.secret_id} for {self.instance_id}"


class Snapshot(models.Model):
    """A copy of an instance's disk (``/home/user``), taken by hand or by its schedule, restored into the
    same instance while it is stopped, or copied into a new instance (a clone).

    It belongs to the instance's account (``owner``: who pays, per GB-day while it exists,
    ``snapshot_meter_ref``) and lives and dies with the instance: releasing the instance deletes its
    snapshots, as AutoDL does, because the provider keeps them beside the disk they copy. ``name`` is
    the provider-side name (``slug``, unique); ``label`` is what the owner calls it.
    """

    class Status(models.TextChoices):
        CREATING = "creating", _("Creating")  # the provider copies the disk; ``progress`` says how far
        READY = "ready", _("Ready")  # kept and billed; may be restored or cloned
        RESTORING = "restoring", _("Restoring")  # copied back over the (stopped) instance's disk
        FAILED = "failed", _("Failed")  # the copy did not finish: ``status_reason`` says why; not billed
        DELETING = "deleting", _("Deleting")  # no longer billed; the provider removes the copy
        DELETED = "deleted", _("Deleted")  # gone (kept as a row for the history)

    class Kind(models.TextChoices):
        MANUAL = "manual", _("Manual")
        SCHEDULED = "scheduled", _("Scheduled")  # made by the instance's schedule; retention deletes it

    BADGE_COLOURS = {
        Status.CREATING: "blue",
        Status.READY: "green",
        Status.RESTORING: "yellow",
        Status.FAILED: "red",
        Status.DELETING: "yellow",
        Status.DELETED: "",
    }
    # Snapshots the owner sees in lists (a deleted one is history only).
    LIVE = (Status.CREATING, Status.READY, Status.RESTORING, Status.FAILED, Status.DELETING)

    slug = models.SlugField(unique=True)
    label = models.CharField(_("name"), max_length=64)
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="snapshots")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="snapshots", verbose_name=_("owner")
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("taken by"),
    )
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices, default=Kind.MANUAL)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.CREATING)
    # A stored message (core.messages): why a snapshot or its restore failed.
    status_reason = models.TextField(_("reason"), blank=True)
    progress = models.PositiveSmallIntegerField(_("progress (%)"), default=0)
    size_bytes = models.PositiveBigIntegerField(_("size (bytes)"), default=0)
    # What the provider answered at its creation (handed back at restore and delete): opaque here.
    provider_state = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    ready_at = models.DateTimeField(_("ready"), null=True, blank=True)
    restored_at = models.DateTimeField(_("last restored"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("snapshot")
        verbose_name_plural = _("snapshots")
        indexes = [models.Index(fields=["instance", "status"], name="instances_snapshot_inst_st")]

    def __str__(self) -> str:
        return self.label

    @property
    def status_reason_text(self) -> str:
        return shown(self.status_reason)

    @property
    def badge_colour(self) -> str:
        return self.BADGE_COLOURS.get(self.status, "")

    @property
    def busy(self) -> bool:
        return self.status in (self.Status.CREATING, self.Status.RESTORING, self.Status.DELETING)


class SnapshotSchedule(models.Model):
    """An instance's scheduled snapshots: one every ``every_hours``, keeping the newest ``keep`` scheduled
    ones (manual snapshots are never deleted by it). ``next_at`` moves forward by compare-and-set before
    a snapshot is taken, so a beat tick run twice takes one."""

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="snapshot_schedule")
    every_hours = models.PositiveSmallIntegerField(_("every (hours)"))
    keep = models.PositiveSmallIntegerField(_("keep the last"))
    next_at = models.DateTimeField(_("next snapshot"))

    class Meta:
        verbose_name = _("snapshot schedule")
        verbose_name_plural = _("snapshot schedules")
        constraints = [
            models.CheckConstraint(condition=models.Q(every_hours__gte=1), name="instances_snapsched_every"),
            models.CheckConstraint(condition=models.Q(keep__gte=1), name="instances_snapsched_keep"),
        ]

    def __str__(self) -> str:
        return f"every {self.every_hours} h, keep {self.keep}"


class InstanceClone(models.Model):
    """Where a clone's disk comes from: the snapshot of another instance (same account, same region) its
    provider copies at ``create`` (``InstanceSpec.disk_from``)."""

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="clone_source")
    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="clones")

    class Meta:
        verbose_name = _("clone")
        verbose_name_plural = _("clones")

    def __str__(self) -> str:
        return f"{self.instance_id} from {self.snapshot_id}"


class InstanceEvent(EventReasonMixin, models.Model):
    """One change of an instance's status, with why: the timeline users see and the clock billing reads.

    A ``NODE`` event is news about the node the instance runs on (it went down or drained, or came
    back); the instance's status is unchanged by it (``old == new``), and it never counts as a crash.
    """

    class Kind(models.TextChoices):
        STATUS = "status", _("Status")  # a status change, or a repair in place (old == new)
        NODE = "node", _("Node")  # the instance's node changed health; the status did not change

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(_("kind"), max_length=8, choices=Kind.choices, default=Kind.STATUS)
    old = models.CharField(_("from"), max_length=16, blank=True)
    new = models.CharField(_("to"), max_length=16)
    reason = models.TextField(_("reason"), blank=True)  # a stored message (core.messages)
    created_at = models.DateTimeField(_("time"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("instance event")
        verbose_name_plural = _("instance events")
        indexes = [models.Index(fields=["instance", "created_at"], name="instances_event_timeline")]

    def __str__(self) -> str:
        return f"{self.old or '∅'} → {self.new}"

    @property
    def new_label(self) -> str:
        if self.kind == self.Kind.NODE:
            return str(self.Kind.NODE.label)
        return Instance.Status(self.new).label if self.new in Instance.Status.values else self.new

    @property
    def badge_colour(self) -> str:
        if self.kind == self.Kind.NODE:
            return "yellow"
        return Instance.BADGE_COLOURS.get(self.new, "")


class StrayMachine(models.Model):
    """A machine a backend reports that no live instance owns: listed for staff, never billed to anyone."""

    backend_alias = models.CharField(_("backend"), max_length=32)
    key = models.CharField(_("key"), max_length=64)
    detail = models.CharField(_("detail"), max_length=255, blank=True)
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    last_seen_at = models.DateTimeField(_("last seen"), default=timezone.now)
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)

    class Meta:
        ordering = ["-last_seen_at"]
        verbose_name = _("stray machine")
        verbose_name_plural = _("stray machines")
        constraints = [models.UniqueConstraint(fields=["backend_alias", "key"], name="instances_stray_unique_key")]

    def __str__(self) -> str:
        return self.key


# --- GPU quota ---------------------------------------------------------------------------------------------


class GpuQuota(models.Model):
    """How many cards of a model a user may hold at once; ``cards=None`` (or no row) means the default
    setting. One user's launches of one model queue on a lock of their own (``quota.quota_check``).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="gpu_quotas")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="quotas")
    cards = models.PositiveIntegerField(_("cards"), null=True, blank=True)

    class Meta:
        verbose_name = _("GPU quota")
        verbose_name_plural = _("GPU quotas")
        constraints = [models.UniqueConstraint(fields=["user", "gpu_model"], name="instances_quota_one_per_model")]

    def __str__(self) -> str:
        return f"{self.user} · {self.gpu_model}: {self.cards}"


class QuotaRequest(models.Model):
    """A user's request to hold up to ``cards`` cards of a model for ``duration_days``; staff decide.

    An approval grants ``granted_cards`` (possibly fewer) until ``expires_at``; after that the quota
    falls back to the base one on its own (the effective quota ignores expired grants, and a periodic
    task marks them expired).
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")  # waiting for staff
        APPROVED = "approved", _("Approved")  # granted until expires_at
        DENIED = "denied", _("Denied")  # refused, with a message
        EXPIRED = "expired", _("Expired")  # was approved; the grant has ended
        CANCELLED = "cancelled", _("Cancelled")  # withdrawn by the user

    BADGE_COLOURS = {
        Status.PENDING: "yellow",
        Status.APPROVED: "green",
        Status.DENIED: "red",
        Status.EXPIRED: "",
        Status.CANCELLED: "",
    }

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quota_requests")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="quota_requests")
    cards = models.PositiveIntegerField(_("cards"))
    duration_days = models.PositiveIntegerField(_("duration (days)"))
    reason = models.TextField(_("reason"))
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING)
    granted_cards = models.PositiveIntegerField(_("granted cards"), null=True, blank=True)
    message = models.TextField(_("message from staff"), blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    created_at = models.DateTimeField(_("requested"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("quota request")
        verbose_name_plural = _("quota requests")
        indexes = [models.Index(fields=["status", "expires_at"], name="instances_quota_req_status")]

    def __str__(self) -> str:
        return f"{self.user} · {self.gpu_model} × {self.cards}"

    @property
    def badge_colour(self) -> str:
        return self.BADGE_COLOURS.get(self.status, "")


class AuditEntry(models.Model):
    """Who did what to a row, when (``action``, with ``detail``): the history staff read of a quota
    request or a reservation, one row per decision or automatic change, written by its services."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(_("action"), max_length=32)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(_("time"), default=timezone.now)

    class Meta:
        abstract = True
        ordering = ["created_at", "id"]


class QuotaAudit(AuditEntry):
    """Who did what to a quota request, when: append-only, one row per decision or automatic change."""

    request = models.ForeignKey(QuotaRequest, on_delete=models.CASCADE, related_name="audit")

    class Meta(AuditEntry.Meta):
        verbose_name = _("quota audit entry")
        verbose_name_plural = _("quota audit entries")

    def __str__(self) -> str:
        return f"{self.action} #{self.request_id}"


# --- Reserved capacity -------------------------------------------------------------------------------------


class Reservation(models.Model):
    """``cards`` cards of ``gpu_model`` in ``region`` held for ``account`` (a person's or a team's) from
    ``starts_at`` until ``ends_at``, granted by staff (``instances.capacity.reservations``).

    While it is in its window, other accounts' on-demand placements leave enough free-or-interruptible
    cards for its unused part; the holder's on-demand launches draw on it first. Unused cards stay lent
    to interruptible work, which is preempted when the holder needs them. Only ``status`` changes,
    through ``core.statemachine`` (active → expired by the beat task, active → cancelled by staff),
    each move with a ``ReservationEvent``.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")  # held between starts_at and ends_at (upcoming before starts_at)
        EXPIRED = "expired", _("Expired")  # its window ended
        CANCELLED = "cancelled", _("Cancelled")  # ended early by staff

    BADGE_COLOURS = {Status.ACTIVE: "green", Status.EXPIRED: "", Status.CANCELLED: ""}

    account = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reservations", verbose_name=_("account")
    )
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="reservations")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="reservations")
    cards = models.PositiveIntegerField(_("cards"))
    starts_at = models.DateTimeField(_("starts"))
    ends_at = models.DateTimeField(_("ends"))
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.ACTIVE)
    note = models.TextField(_("note"), blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+", verbose_name=_("granted by")
    )
    # The quota request whose approval made it (its grant's window), if any.
    quota_request = models.ForeignKey(
        QuotaRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="reservations"
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        ordering = ["-starts_at", "-id"]
        verbose_name = _("reservation")
        verbose_name_plural = _("reservations")
        # The launch path's one question (``reservations_active_exist``): any active one here, now?
        indexes = [
            models.Index(fields=["region", "gpu_model", "status", "ends_at"], name="instances_reservation_active")
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(cards__gte=1), name="instances_reservation_cards_positive"),
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")), name="instances_reservation_window"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.account} · {self.region} · {self.gpu_model} × {self.cards}"

    @property
    def badge_colour(self) -> str:
        return self.BADGE_COLOURS.get(self.status, "")

    def is_current(self, now: datetime | None = None) -> bool:
        """Active and inside its window now (an active one before its start is upcoming)."""
        now = now or timezone.now()
        return self.status == self.Status.ACTIVE and self.starts_at <= now < self.ends_at


class ReservationEvent(AuditEntry):
    """Who did what to a reservation, when: created, cancelled, expired. Append-only by use."""

    reservation = models.ForeignKey(Reservation, on_delete=models.CASCADE, related_name="events")

    class Meta(AuditEntry.Meta):
        verbose_name = _("reservation event")
        verbose_name_plural = _("reservation events")

    def __str__(self) -> str:
        return f"{self.action} #{self.reservation_id}"
