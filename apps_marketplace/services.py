"""One-click deploy: an app serving a model on an instance launched through the instances app's services.

Deploying is ``instance_launch`` with the app's fit check in front, so the same quota, balance,
placement and billing rules apply and their refusals (``instances.errors.InstanceError``) reach the
user unchanged. The instance boots the platform's CUDA base image (``APPS_DEPLOY_BASE_IMAGE``); the
app's own container image and start command are recorded on the deployment and rendered from its
parameters (what a backend that runs apps starts on it). The simulated cloud runs no process, so there
a deployment is "ready" when its instance is running; a real backend adds a readiness probe of the app's
port before it reports ready.

Redeploying with other parameters updates them and restarts the instance in place: the cards, the node
and the billing meter stay as they are (no second launch that could be refused for capacity while the
first still holds the cards), and the restart reruns the start command with the new parameters. A change
that no longer fits the instance's GPUs is refused; deploy again on bigger GPUs for that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps_marketplace import fit
from apps_marketplace.models import App, Deployment, ModelEntry
from apps_marketplace.parameters import app_command_render, app_cpu_command_render, app_parameters_clean
from apps_marketplace.selectors import app_fit_defaults, app_fit_table, model_spec
from core.messages import reason as stored
from instances import services as instance_services
from instances.errors import LaunchInvalid, OperationNotAllowed
from instances.models import GpuModel, Image, Region
from providers import AppLaunch
from teams.models import TeamEvent
from teams.services import team_event_record

API_KEY_PREFIX = "dk-"
DISK_GB = 100


class DeploymentInvalid(LaunchInvalid):
    """A choice the user can correct: ``field`` names it (a 400 / a form error); ``fields`` maps every bad
    field to its messages when there are several (the app's parameters)."""

    def __init__(self, message: str, *, field: str | None = None, fields: dict[str, list[str]] | None = None):
        super().__init__(message, field=field)
        self.fields = fields or {}


class DeploymentKeyRefused(Exception):
    """The key is not this deployment's."""


def api_key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _new_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def _workload(*, app: App, parameters: dict[str, Any]) -> fit.Workload:
    defaults = app_fit_defaults(app=app)
    return fit.Workload(
        precision=str(parameters.get("precision") or defaults["precision"]),
        context_length=int(parameters.get("context_length") or defaults["context_length"]),
    )


def deployment_fit_check(
    *, app: App, model: ModelEntry | None, parameters: dict[str, Any], gpu_model: GpuModel, gpu_count: int
) -> fit.FitRow | None:
    """The fit check's row for this choice; raises ``DeploymentInvalid`` when the model does not fit."""
    if not app.gpu_required or model is None:
        return None
    try:
        fit.workload_validate(_workload(app=app, parameters=parameters), model_spec(model))
        table = app_fit_table(app=app, model=model, workload=_workload(app=app, parameters=parameters))
    except fit.FitInputError as exc:
        raise DeploymentInvalid(exc.message, field=exc.field) from exc
    row = next((r for r in table.rows if r.gpu.slug == gpu_model.slug and r.cards == gpu_count), None)
    if row is None:
        raise DeploymentInvalid(_("That GPU model is not available."), field="gpu_model")
    if not row.fits:
        raise DeploymentInvalid(
            _("%(model)s does not fit on %(cards)d × %(gpu)s: %(reason)s")
            % {"model": model.repo_id, "cards": gpu_count, "gpu": gpu_model.name, "reason": row.reason},
            field="gpu_count",
        )
    return row


def _parameters_clean(*, app: App, model: ModelEntry | None, parameters: dict[str, Any]) -> dict[str, Any]:
    if model is not None and not app.served_models.filter(pk=model.pk, is_active=True).exists():
        raise DeploymentInvalid(_("This app does not serve that model."), field="model")
    try:
        return app_parameters_clean(app=app, values=parameters or {}, model=model)
    except ValidationError as exc:
        fields = {f"parameters.{key}": messages for key, messages in exc.message_dict.items()}
        key, messages = next(iter(fields.items()))
        raise DeploymentInvalid(" ".join(messages), field=key, fields=fields) from exc


def _base_image() -> Image:
    image = Image.objects.filter(slug=settings.APPS_DEPLOY_BASE_IMAGE, is_active=True).first()
    if image is None:
        raise DeploymentInvalid(_("The image apps run on is not available."), field="image")
    return image


def deployment_app_launch(*, app: App, parameters: dict[str, Any], gpu_count: int) -> AppLaunch:
    """What the instance runs for this deployment: the app's start command for these parameters.

    ``$APP_API_KEY`` is the app server's own key, a secret of the backend that the console's proxy
    adds on the way up; the deployment's API key (the user's) stops at the proxy. ``{host}``,
    ``{port}`` and ``{base_path}`` are the backend's to fill in.
    """
    command, webui_command = app_command_render(
        app=app,
        values=parameters,
        api_key="$APP_API_KEY",
        tensor_parallel_size=gpu_count if app.supports_tensor_parallel else 1,
        for_backend=True,
    )
    return AppLaunch(
        cpu=_cpu_launch(app=app, parameters=parameters),
        gpu_required=app.gpu_required,
        name=app.slug,
        argv=("/bin/sh", "-c", f"exec {command}"),
        image=app.image,
        port=app.port,
        # vLLM answers /health once the weights are loaded; a WebUI is ready when its page answers.
        health_path="/health" if app.openai_compatible else (app.webui_path or "/"),
        serves_base_path="{base_path}" in app.command_template,
        webui=AppLaunch(
            name=f"{app.slug}-webui",
            argv=("/bin/sh", "-c", f"exec {webui_command}"),
            image=app.webui_image,
            port=app.effective_webui_port,
            health_path="/",
            serves_base_path="{base_path}" in app.webui_command_template,
        )
        if webui_command
        else None,
    )


def _cpu_launch(*, app: App, parameters: dict[str, Any]) -> AppLaunch | None:
    """The app's CPU variant: its command in the image the console built (``App.cpu_image``), pinned by
    the digest ``images_publish`` recorded (a host may also map the slug to a local image)."""
    command = app_cpu_command_render(app=app, values=parameters, api_key="$APP_API_KEY", for_backend=True)
    if not command:
        return None
    image = Image.objects.filter(slug=app.cpu_image).first()
    return AppLaunch(
        name=app.slug,
        argv=("/bin/sh", "-c", f"exec {command}"),
        image=image.pinned_ref if image is not None else "",
        image_slug=app.cpu_image,
        port=app.cpu_port or app.port,
        health_path="/health" if app.openai_compatible else (app.webui_path or "/"),
        serves_base_path="{base_path}" in app.cpu_command_template,
        gpu_required=False,
    )


def _audit(*, actor, action: str, deployment: Deployment) -> None:
    """The team's audit event, when a person acts on a team's account (none, and no query, otherwise)."""
    if actor is not None and actor.pk != deployment.owner_id:
        team_event_record(
            account=deployment.owner_id,
            actor=actor,
            action=action,
            target=deployment.app.name,
            details={"deployment": str(deployment.pk), "instance": deployment.instance.name},
        )


def deployment_create(
    *,
    user,
    app: App,
    model: ModelEntry | None,
    parameters: dict[str, Any],
    gpu_model: GpuModel,
    gpu_count: int,
    region: Region,
    volumes=(),
    actor=None,
) -> tuple[Deployment, str]:
    """Check the fit, launch the instance (quota, balance, placement, billing) and record the deployment.

    ``user`` is the account that owns and pays (a person's, or a team's: the instance is the team's too);
    ``actor`` the person deploying (default: ``user``), who may operate it as the team's admins may.

    ``volumes`` are ``(volume, mount_path, mode)`` triples mounted into the app's instance, as for any
    launch: a training run's output on a volume is served without an upload.

    Returns the deployment and its API key, which is not stored and cannot be shown again. Raises
    ``DeploymentInvalid`` or the instances app's errors with nothing created and nothing charged.
    """
    if not app.is_active:
        raise DeploymentInvalid(_("That app is not available."), field="app")
    cleaned = _parameters_clean(app=app, model=model, parameters=parameters)
    deployment_fit_check(app=app, model=model, parameters=cleaned, gpu_model=gpu_model, gpu_count=gpu_count)
    key = _new_key()
    actor = actor or user
    with transaction.atomic():
        instance = instance_services.instance_launch(
            instance_services.LaunchRequest(
                user=user,
                actor=actor,
                region=region,
                gpu_model=gpu_model,
                gpu_count=gpu_count,
                image=_base_image(),
                disk_gb=DISK_GB,
                name=f"{app.slug}-{timezone.now():%m%d-%H%M%S}"[:64],
                app=deployment_app_launch(app=app, parameters=cleaned, gpu_count=gpu_count),
                volumes=volumes,
            )
        )
        deployment = Deployment.objects.create(
            owner=user,
            created_by=actor,
            app=app,
            model=model,
            parameters=cleaned,
            instance=instance,
            api_key_hash=api_key_hash(key),
            api_key_prefix=key[:8],
        )
        _audit(actor=actor, action=TeamEvent.Action.APP_DEPLOYED, deployment=deployment)
    return deployment, key


def deployment_key_regenerate(*, deployment: Deployment) -> str:
    """A new API key; the old one stops working at once. Returned once, stored hashed."""
    key = _new_key()
    deployment.api_key_hash = api_key_hash(key)
    deployment.api_key_prefix = key[:8]
    deployment.save(update_fields=["api_key_hash", "api_key_prefix", "updated_at"])
    return key


def deployment_key_check(*, deployment: Deployment, key: str) -> None:
    """Raises ``DeploymentKeyRefused`` unless ``key`` is this deployment's (constant-time compare)."""
    if not key or not hmac.compare_digest(api_key_hash(key), deployment.api_key_hash):
        raise DeploymentKeyRefused


def deployment_stop(*, deployment: Deployment) -> Deployment:
    instance_services.instance_stop(instance=deployment.instance)
    deployment.instance.refresh_from_db()
    return deployment


def deployment_start(*, deployment: Deployment) -> Deployment:
    instance_services.instance_start(instance=deployment.instance)
    deployment.instance.refresh_from_db()
    return deployment


def deployment_restart(*, deployment: Deployment) -> Deployment:
    instance_services.instance_restart(instance=deployment.instance)
    deployment.instance.refresh_from_db()
    return deployment


def deployment_redeploy(*, deployment: Deployment, model: ModelEntry | None, parameters: dict[str, Any]) -> Deployment:
    """New model or parameters on the same instance: fit-checked against its GPUs, then a restart."""
    instance = deployment.instance
    if not instance.can_restart():
        raise OperationNotAllowed(_("Redeploy a running deployment; start it first."))
    cleaned = _parameters_clean(app=deployment.app, model=model, parameters=parameters)
    deployment_fit_check(
        app=deployment.app, model=model, parameters=cleaned, gpu_model=instance.gpu_model, gpu_count=instance.gpu_count
    )
    launch = deployment_app_launch(app=deployment.app, parameters=cleaned, gpu_count=instance.gpu_count)
    with transaction.atomic():
        deployment.model = model
        deployment.parameters = cleaned
        deployment.save(update_fields=["model", "parameters", "updated_at"])
        # The restart boots the instance with its current app: this one.
        instance.app_launch = dataclasses.asdict(launch)
        instance.save(update_fields=["app_launch"])
        instance_services.instance_restart(
            instance=instance, reason=stored(gettext_noop("Redeployed with new parameters"))
        )
    instance.refresh_from_db()
    return deployment


def deployment_delete(*, deployment: Deployment, actor=None) -> None:
    """Release the instance (its meters close) and forget the deployment and its key.

    ``actor``: the person who asked (for a team's audit log)."""
    instance = deployment.instance
    with transaction.atomic():
        _audit(actor=actor, action=TeamEvent.Action.APP_REMOVED, deployment=deployment)
        if instance.can_release():
            instance_services.instance_release(instance=instance, reason=stored(gettext_noop("Deployment deleted")))
        deployment.delete()
