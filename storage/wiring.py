"""Storage's answers to what the instances app asks of volumes (``instances.hooks.volumes``).

Instances is below storage and imports none of it, so at launch, at every boot and on its pages it asks
the hook; ``StorageConfig.ready()`` registers these answers (``wire``).
"""

from __future__ import annotations

from django.db.models import QuerySet

from instances import hooks as instance_hooks
from instances.hooks import VolumeHooks
from instances.models import Instance
from providers import VolumeMount
from storage.models import Volume, VolumeAttachment
from storage.selectors import attachable_volumes_for, instance_mounts
from storage.services import volume_attachments_at_launch, volume_mounts_for_boot


class StorageVolumeHooks(VolumeHooks):
    mode_choices = VolumeAttachment.Mode.choices
    default_mode = VolumeAttachment.Mode.READ_WRITE

    def attach_at_launch(self, *, user, instance: Instance, volumes) -> None:
        volume_attachments_at_launch(user=user, instance=instance, volumes=volumes)

    def mounts_for_boot(self, *, instance: Instance) -> tuple[VolumeMount, ...]:
        return volume_mounts_for_boot(instance=instance)

    def mounts(self, *, instance: Instance) -> list[VolumeAttachment]:
        return instance_mounts(instance=instance)

    def attachable(self, *, user) -> QuerySet[Volume]:
        return attachable_volumes_for(user=user)

    def owned(self, *, user) -> QuerySet[Volume]:
        return Volume.objects.filter(owner=user)


def wire() -> None:
    """Register storage's answers to the hooks of the apps below it."""
    instance_hooks.volumes.implement(StorageVolumeHooks())
