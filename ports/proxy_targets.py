"""The console proxy's resolver for service ports (``console.hooks.port_target``).

``/i/<instance>/p<port>/…`` reaches a declared port for whoever operates the instance (its owner; in a
team, its creator while a member who may launch, and the admins: ``teams.access``, checked on every
request, so a former member is refused at once); ``/i/<instance>/s-<token>/…``
reaches it for anyone holding an active share link whose maker still operates the instance (a former
member's links stop at once). Anything else, an undeclared port, a revoked or
expired link, a stopped instance, is None: the proxy's plain 404. The instance's provider says where
the port is reachable (``EntryPointsCapability.port_target``).
"""

from __future__ import annotations

import re
import uuid

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q
from django.utils import timezone

from instances.models import Instance
from ports.models import InstancePort, PortShare
from providers import BackendError, get_backend
from teams.access import Access, resource_access

PORT_SERVICE = re.compile(r"^p([1-9][0-9]{0,4})$")
SHARE_SERVICE = re.compile(r"^s-([a-z2-7]{32})$")


def is_port_service(service: str) -> bool:
    return bool(PORT_SERVICE.match(service) or SHARE_SERVICE.match(service))


def is_public_service(service: str) -> bool:
    """A share link: it needs no session."""
    return bool(SHARE_SERVICE.match(service))


def _maker_operates(share: PortShare) -> bool:
    """Whether the link's maker still operates its instance: a link lends its maker's access to anyone
    with the URL, so a former member's links stop here even where the revocation at their leaving
    (``ports.services.shares_revoke_for_member``) did not reach one. No query for a personal instance's
    link, one for a team's. A link made before makers were recorded counts as its instance's launcher's
    (or, for an instance older than launchers, its owner's)."""
    instance = share.port.instance
    maker = share.created_by or instance.created_by or instance.owner
    access = resource_access(user=maker, owner_id=instance.owner_id, created_by_id=instance.created_by_id)
    return access == Access.OPERATE


def port_proxy_target(*, instance_id: str, service: str, user, api_key: str = ""):
    try:
        pk = uuid.UUID(str(instance_id))
    except ValueError:
        return None
    running = Q(instance_id=pk, instance__status=Instance.Status.RUNNING)
    if match := PORT_SERVICE.match(service):
        if user is None or not getattr(user, "is_authenticated", False):
            return None
        port = InstancePort.objects.filter(running, port=int(match[1])).select_related("instance").first()
        if port is not None and (
            resource_access(
                user=user,
                owner_id=port.instance.owner_id,
                created_by_id=port.instance.created_by_id,
            )
            != Access.OPERATE
        ):
            port = None
    elif match := SHARE_SERVICE.match(service):
        share = (
            PortShare.objects.filter(token=match[1], revoked_at=None, port__instance_id=pk)
            .filter(port__instance__status=Instance.Status.RUNNING)
            .filter(Q(expires_at=None) | Q(expires_at__gt=timezone.now()))
            .select_related("port__instance__owner", "created_by", "port__instance__created_by")
            .first()
        )
        port = share.port if share is not None and _maker_operates(share) else None
    else:
        return None
    if port is None:
        return None
    try:
        locate = getattr(get_backend(port.instance.backend_alias), "port_target", None)
        return locate(key=port.instance.key, port=port.port) if locate else None
    except (BackendError, ImproperlyConfigured):
        return None
