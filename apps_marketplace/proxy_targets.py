"""The console proxy's resolver with deployments' API keys (``console.hooks.proxy_target``).

``/i/<instance>/app/…`` is a deployment's app server. Its owner reaches it with the console session,
like JupyterLab; a script or an OpenAI client reaches it with the deployment's own API key as a Bearer
token. A key opens only its own deployment's app: another deployment's key, a revoked key, a key for
JupyterLab or VS Code, and a deployment that is not running all get the proxy's plain 404, so a key
holder learns nothing about anything else.
"""

from __future__ import annotations

import uuid

from django.core.exceptions import ImproperlyConfigured

from apps_marketplace.models import Deployment
from apps_marketplace.services import DeploymentKeyRefused, deployment_key_check
from instances.models import Instance
from instances.proxy_targets import instance_proxy_target
from providers import BackendError, get_backend

APP_SERVICE = "app"


def deployment_proxy_target(*, instance_id: str, service: str, user, api_key: str = ""):
    if not api_key:
        return instance_proxy_target(instance_id=instance_id, service=service, user=user)
    if service != APP_SERVICE:
        return None
    try:
        pk = uuid.UUID(str(instance_id))
    except ValueError:
        return None
    deployment = (
        Deployment.objects.filter(instance_id=pk, instance__status=Instance.Status.RUNNING)
        .select_related("instance")
        .only("id", "api_key_hash", "instance__id", "instance__backend_alias", "instance__status")
        .first()
    )
    if deployment is None:
        return None
    try:
        deployment_key_check(deployment=deployment, key=api_key)
    except DeploymentKeyRefused:
        return None
    try:
        return get_backend(deployment.instance.backend_alias).proxy_target(key=deployment.instance.key, service=service)
    except (BackendError, ImproperlyConfigured):
        return None
