"""The simulated cloud's own tables: its fleet of nodes, its machines and its volumes.

The simulated backend keeps its cloud in the database so web, worker and beat processes see one
cloud. The console never reads these tables; it talks to the backend through its contract only.
They were created by the instances app's migrations and keep those names (``db_table``, and the
constraints' names), so moving them here moved no data.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class SimulatedNode(models.Model):
    """A host in the simulated cloud."""

    backend_alias = models.CharField(max_length=32)
    name = models.CharField(max_length=96)
    region_slug = models.CharField(max_length=50)
    gpu_slug = models.CharField(max_length=50)
    cards = models.PositiveSmallIntegerField()
    is_lost = models.BooleanField(default=False)
    is_draining = models.BooleanField(default=False)  # its machines run on; it takes no new ones
    block = models.CharField(max_length=64, blank=True, default="")  # its leaf switch (BLOCK_NODES per block)
    images = models.JSONField(default=list, blank=True)  # the images it holds (digests or slugs): no pull

    class Meta:
        db_table = "instances_simulatednode"
        constraints = [models.UniqueConstraint(fields=["backend_alias", "name"], name="instances_simnode_unique")]

    def __str__(self) -> str:
        return self.name


class SimulatedMachine(models.Model):
    """A machine in the simulated cloud, named by the console's key."""

    backend_alias = models.CharField(max_length=32)
    key = models.CharField(max_length=64)
    node = models.ForeignKey(SimulatedNode, null=True, on_delete=models.SET_NULL, related_name="machines")
    cards = models.PositiveSmallIntegerField()
    power = models.CharField(max_length=16, default="on")  # on, off
    spec = models.JSONField(default=dict)
    ready_at = models.DateTimeField(null=True)  # None while on: never boots (an injected hang)
    last_active_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "instances_simulatedmachine"
        constraints = [models.UniqueConstraint(fields=["backend_alias", "key"], name="instances_simmachine_unique")]

    def __str__(self) -> str:
        return self.key


class SimulatedVolume(models.Model):
    """A volume in the simulated cloud, named by the console's key. ``used_bytes`` is what its files
    would take; the simulator's ``volume_write`` lever sets it (nothing is stored anywhere)."""

    backend_alias = models.CharField(max_length=32)
    key = models.CharField(max_length=64)
    size_gb = models.PositiveIntegerField()
    used_bytes = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "instances_simulatedvolume"
        constraints = [models.UniqueConstraint(fields=["backend_alias", "key"], name="instances_simvolume_unique")]

    def __str__(self) -> str:
        return self.key
