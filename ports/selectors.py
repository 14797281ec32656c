"""Reads, scoped to the asking user: another user's instance, port or link is a 404 by construction."""

from __future__ import annotations

import socket

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from instances.models import Instance
from ports.models import InstancePort, PortShare
from providers import BackendError, get_backend


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


def port_answering(*, port: InstancePort, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on the port now. Asked by the card's state badge, loaded on
    its own after the page (pages never ask a provider), and only while the instance runs."""
    instance = port.instance
    if instance.status != Instance.Status.RUNNING:
        return False
    try:
        locate = getattr(get_backend(instance.backend_alias), "port_target", None)
        target = locate(key=instance.key, port=port.port) if locate else None
    except (BackendError, ImproperlyConfigured):
        return False
    if target is None:
        return False
    try:
        socket.create_connection((target.host, target.port), timeout=timeout).close()
    except OSError:
        return False
    return True
