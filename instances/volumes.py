"""What the instances app asks of volumes, answered by the app named in ``INSTANCES_VOLUME_HOOKS``.

Volumes belong to an app above this one (storage attaches its volumes to instances), so instances
imports none of its modules; at launch, at every boot and on its pages it asks the hooks instead,
as billing asks ``BILLING_OUT_OF_FUNDS_HOOK`` when money runs out. Like a provisioning backend: a
dotted path in settings, this base class (which offers no volumes, the default), and a loader that
imports and caches. storage points the setting at ``storage.hooks.StorageVolumeHooks``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from django.conf import settings
from django.db.models import QuerySet
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _

from instances.errors import LaunchInvalid
from instances.models import Instance
from providers import VolumeMount


class VolumeHooks:
    """No volumes: launches take none, machines boot with none mounted. Subclasses offer them."""

    # The choices of how a volume is mounted, as ``(value, label)``, and the launch form's default.
    mode_choices: Sequence[tuple[str, str]] = ()
    default_mode = "rw"

    def attach_at_launch(self, *, user, instance: Instance, volumes: Iterable) -> None:
        """Attach ``volumes`` (``(volume, mount_path, mode)`` triples) to ``instance``, which is being
        launched: called inside the launch's transaction, before the machine is created, so a refusal
        (an ``InstanceError``) rolls the whole launch back."""
        if volumes:
            raise LaunchInvalid(_("Volumes are not offered in that region."))

    def mounts_for_boot(self, *, instance: Instance) -> tuple[VolumeMount, ...]:
        """The volumes ``instance`` mounts as it boots now (create, start, restart, repair): the spec's
        ``volumes``. Detaches requested while it ran take effect here."""
        return ()

    def mounts(self, *, instance: Instance) -> list:
        """The instance's attachments for its page: each with ``mount_path``, ``volume`` (``name``,
        ``size_gb``), ``volume_id`` and ``get_mode_display``."""
        return []

    def attachable(self, *, user) -> Iterable:
        """The user's volumes that can be attached now, each with ``pk``, ``name``, ``size_gb``,
        ``region_id`` and ``region`` (the launch form's choices)."""
        return []

    def owned(self, *, user) -> QuerySet:
        """Every volume of ``user``, the queryset the API's launch field looks ids up in (another user's id
        "does not exist")."""
        # With no volumes app there is no volume model: an empty queryset (of any model) answers every
        # id with "does not exist", which is the truth.
        return Instance.objects.none()


_cache: dict[str, VolumeHooks] = {}
_lock = threading.Lock()


def volume_hooks() -> VolumeHooks:
    """The hooks ``INSTANCES_VOLUME_HOOKS`` names, imported once per path (so ``override_settings``
    in a test reaches the next call)."""
    path = settings.INSTANCES_VOLUME_HOOKS
    hooks = _cache.get(path)
    if hooks is None:
        with _lock:
            hooks = _cache.setdefault(path, import_string(path)())
    return hooks
