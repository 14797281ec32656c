"""Clone: a new instance of the same account, region, GPUs and image as another, whose disk starts as a
copy of one of its snapshots (taken now when none is named). A launch in every other way; the provider
copies the disk at ``create`` (``InstanceSpec.disk_from``, read by ``launch.clone_disk_from``)."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from instances.errors import OperationNotAllowed
from instances.models import Instance, InstanceClone, Snapshot
from instances.services.launch import LaunchRequest, instance_launch
from instances.services.snapshots import snapshot_create

S = Snapshot.Status


def instance_clone(*, instance: Instance, actor, name: str = "", snapshot: Snapshot | None = None) -> Instance:
    """A new instance of ``instance``'s account: the same region, GPU model and count, the same image
    (the digest it runs, pinned) and a copy of its disk, from ``snapshot`` (ready, of this instance) or
    from a snapshot taken now. It is a launch in every other way: quota, capacity, balance, the price
    per hour from the catalogue, billed from when it runs. Its disk is copied when the snapshot is
    ready; the snapshot stays (billed) until its owner deletes it."""
    if snapshot is not None and (snapshot.instance_id != instance.pk or snapshot.status != S.READY):
        raise OperationNotAllowed(_("Clone from a ready snapshot of this instance."))
    if instance.node_count > 1:
        raise OperationNotAllowed(_("A cluster cannot be cloned; snapshot a single machine."))
    name = (name or "").strip() or f"{instance.name}-clone"[:64]
    keys = [key for key in instance.ssh_keys.all() if key.user_id == getattr(actor, "pk", None)]
    with transaction.atomic():
        if snapshot is None:
            snapshot = snapshot_create(instance=instance, actor=actor, label=_("For clone %(name)s") % {"name": name})
        clone = instance_launch(
            LaunchRequest(
                user=instance.owner,
                actor=actor,
                region=instance.region,
                gpu_model=instance.gpu_model,
                gpu_count=instance.gpu_count,
                image=instance.image,
                disk_gb=instance.disk_gb,
                ssh_keys=keys,
                name=name,
                tier=instance.tier,
            )
        )
        if instance.image_ref and clone.image_ref != instance.image_ref:
            # The digest the source runs, even if its image's tag has moved since it was launched.
            Instance.objects.filter(pk=clone.pk).update(image_ref=instance.image_ref)
            clone.image_ref = instance.image_ref
        InstanceClone.objects.create(instance=clone, snapshot=snapshot)
    return clone
