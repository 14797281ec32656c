"""Declare and remove ports; make and revoke share links. The page and the API call these."""

from __future__ import annotations

import base64
import secrets
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from instances.models import Instance
from ports.errors import PortRefused
from ports.models import MAX_PORT, InstancePort, PortShare

MAX_PORTS_PER_INSTANCE = 16


def _token() -> str:
    """160 random bits as 32 lower-case base32 characters: safe in a URL path and in a host name."""
    return base64.b32encode(secrets.token_bytes(20)).decode().lower()


def port_declare(*, instance: Instance, port: int, name: str = "") -> InstancePort:
    """Serve ``port`` of the instance to its owner; declaring a port twice is refused (it exists)."""
    if instance.status == Instance.Status.RELEASED:
        raise PortRefused(_("This instance was released."), code="invalid_state")
    if not isinstance(port, int) or not 1 <= port <= MAX_PORT:
        raise PortRefused(_("A port is a number from 1 to 65535."), field="port")
    name = (name or "").strip()
    if len(name) > 64:
        raise PortRefused(_("Names are at most 64 characters."), field="name")
    if instance.ports.count() >= MAX_PORTS_PER_INSTANCE:
        raise PortRefused(
            _("An instance serves at most %(n)d ports.") % {"n": MAX_PORTS_PER_INSTANCE}, code="limit_reached"
        )
    try:
        with transaction.atomic():
            return InstancePort.objects.create(instance=instance, port=port, name=name)
    except IntegrityError as exc:
        raise PortRefused(_("Port %(port)d is already served.") % {"port": port}, field="port") from exc


def ports_declare_at_launch(*, instance: Instance, ports: list[int]) -> None:
    """``instances.hooks.ports_at_launch``: the ports asked for at launch (checked there), in its transaction."""
    for port in ports:
        port_declare(instance=instance, port=port)


def port_remove(*, port: InstancePort) -> None:
    """Stop serving the port; its share links go with it."""
    port.delete()


def share_create(*, port: InstancePort, label: str = "", expires_at: datetime | None = None, actor=None) -> PortShare:
    """A public link to ``port``, made by ``actor`` (the person; recorded, since the link lends their
    access and ends with it: ``shares_revoke_for_member``, and ``ports.proxy_targets``)."""
    label = (label or "").strip()
    if len(label) > 64:
        raise PortRefused(_("Labels are at most 64 characters."), field="label")
    if expires_at is not None and expires_at <= timezone.now():
        raise PortRefused(_("Choose an expiry in the future."), field="expires_at")
    return PortShare.objects.create(port=port, token=_token(), label=label, expires_at=expires_at, created_by=actor)


def share_revoke(*, share: PortShare) -> bool:
    """Revoke the link now (the next request through it is a 404). Repeats are harmless: True once."""
    return bool(PortShare.objects.filter(pk=share.pk, revoked_at=None).update(revoked_at=timezone.now()))


def shares_revoke_for_member(*, account, user) -> int:
    """``teams.hooks.membership_end``: ``user`` left the team whose account is ``account`` (or was
    removed): revoke the share links they made on its instances, in the same transaction. A link hands
    its maker's access to whoever holds the URL, so it must not outlive the membership that gave it.
    Links made before makers were recorded count as their instance's launcher's. Returns how many."""
    made_by_them = Q(created_by=user) | Q(created_by=None, port__instance__created_by=user)
    return PortShare.objects.filter(made_by_them, port__instance__owner=account, revoked_at=None).update(
        revoked_at=timezone.now()
    )
