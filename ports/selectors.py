"""Reads, scoped to the asking user: another user's instance, port or link is a 404 by construction."""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from instances.models import Instance
from ports.models import InstancePort, PortShare


def instance_get_for(*, user, instance_id) -> Instance:
    return get_object_or_404(Instance.objects.filter(owner_id=user.pk), pk=instance_id)


def ports_for(*, instance: Instance) -> list[InstancePort]:
    shares = PortShare.objects.order_by("-created_at", "-id")
    return list(instance.ports.prefetch_related(Prefetch("shares", queryset=shares)))


def port_get_for(*, user, instance_id, port_id) -> InstancePort:
    return get_object_or_404(
        InstancePort.objects.select_related("instance").filter(instance__owner_id=user.pk, instance_id=instance_id),
        pk=port_id,
    )


def share_get_for(*, user, port: InstancePort, share_id) -> PortShare:
    return get_object_or_404(PortShare.objects.filter(port=port, port__instance__owner_id=user.pk), pk=share_id)
