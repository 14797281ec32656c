"""The console proxy's resolver backed by the Instance model (``console.hooks.proxy_target``).

Only a person who may operate the instance (its owner; on a team's account, as ``teams.access`` says:
the team's admins and its launcher while a member who may launch), and only while it is running, gets
a target; everyone else gets None, which the proxy answers with the same 404 as a URL that names no
instance. Asked on every request (and WebSocket connection), so a member removed from the team loses
their servers' tabs at once. The backend that runs the
instance says where its server listens and which secret to inject (``ProvisioningBackend.proxy_target``).
"""

from __future__ import annotations

import uuid

from django.core.exceptions import ImproperlyConfigured

from instances.models import Instance
from providers import BackendError, get_backend
from teams.access import Access, resource_access


def instance_proxy_target(*, instance_id: str, service: str, user, api_key: str = ""):
    if api_key or user is None:
        return None  # instances know no keys: a deployment's key is checked by apps_marketplace.proxy_targets
    try:
        pk = uuid.UUID(str(instance_id))
    except ValueError:
        return None
    instance = (
        Instance.objects.filter(pk=pk, status=Instance.Status.RUNNING)
        .only("id", "owner_id", "created_by_id", "backend_alias", "backend_state")
        .first()
    )
    if instance is None:
        return None
    if resource_access(user=user, owner_id=instance.owner_id, created_by_id=instance.created_by_id) != Access.OPERATE:
        return None
    try:
        # None for a server the machine does not run (or not now): the backend knows, per request.
        return get_backend(instance.backend_alias).proxy_target(key=instance.key, service=service)
    except (BackendError, ImproperlyConfigured):
        return None
