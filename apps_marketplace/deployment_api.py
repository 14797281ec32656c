"""REST endpoints for one-click deployments: the same services and errors as the pages.

A field problem (the model does not fit, a bad parameter) is a 400 naming the field; a business refusal
from the instances app (``no_capacity``, ``quota_exceeded``, ``insufficient_funds``, ``invalid_state``)
is a 409 with that code. Another account's deployment is a 404.

In the acting context, as the pages: deploying needs ``resources.launch``; stopping, starting,
redeploying, a new key and deleting need OPERATE (its creator, or a team admin); a refusal is a 403
with ``code: permission_denied`` and a message saying why.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from apps_marketplace import selectors, services
from apps_marketplace.models import App, Deployment, ModelEntry
from core.drf import SlugRelatedField
from idempotency.decorators import IDEMPOTENCY_KEY_PARAMETER, idempotent
from instances.api import LaunchVolumeSerializer
from instances.api import _raise as _raise_instance_error
from instances.errors import InstanceError
from instances.models import GpuModel, Instance, Region
from teams.access import request_acting, require_access, require_permission
from teams.roles import Permission


def _raise(exc: InstanceError):
    if isinstance(exc, services.DeploymentInvalid) and exc.fields:
        raise ValidationError(exc.fields) from exc
    _raise_instance_error(exc)


class StepSerializer(serializers.Serializer):
    code = serializers.CharField()
    label = serializers.CharField()
    state = serializers.ChoiceField(choices=["done", "current", "todo"])


class DeploymentSerializer(serializers.ModelSerializer):
    app = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    model = serializers.SlugRelatedField(slug_field="repo_id", read_only=True, allow_null=True)
    instance = serializers.UUIDField(source="instance_id", read_only=True)
    instance_status = serializers.CharField(source="instance.status", read_only=True)
    region = serializers.CharField(source="instance.region.slug", read_only=True)
    gpu_model = serializers.CharField(source="instance.gpu_model.slug", read_only=True)
    gpu_count = serializers.IntegerField(source="instance.gpu_count", read_only=True)
    hourly_price_fen = serializers.IntegerField(source="instance.hourly_price_fen", read_only=True)
    status = serializers.SerializerMethodField()
    status_display = serializers.SerializerMethodField()
    # Why it is in its status (why it failed, above all), in the request's language.
    status_reason = serializers.CharField(source="instance.status_reason_text", read_only=True)
    steps = serializers.SerializerMethodField()
    serving = serializers.SerializerMethodField()
    webui_url = serializers.SerializerMethodField()
    api_base_url = serializers.SerializerMethodField()

    class Meta:
        model = Deployment
        fields = [
            "id",
            "app",
            "model",
            "parameters",
            "instance",
            "instance_status",
            "region",
            "gpu_model",
            "gpu_count",
            "hourly_price_fen",
            "status",
            "status_display",
            "status_reason",
            "steps",
            "serving",
            "webui_url",
            "api_base_url",
            "api_key_prefix",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def _status(self, obj: Deployment):
        return selectors.deployment_status(deployment=obj)

    def _endpoints(self, obj: Deployment) -> dict:
        request = self.context.get("request")
        return selectors.deployment_endpoints(
            deployment=obj, host=request.get_host() if request else "", scheme=request.scheme if request else "https"
        )

    def get_status(self, obj: Deployment) -> str:
        return self._status(obj).code

    def get_status_display(self, obj: Deployment) -> str:
        return self._status(obj).label

    @extend_schema_field(StepSerializer(many=True))
    def get_steps(self, obj: Deployment) -> list[dict]:
        return [{**step, "label": str(step["label"])} for step in self._status(obj).steps]

    def get_serving(self, obj: Deployment) -> bool:
        return self._endpoints(obj)["serving"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_webui_url(self, obj: Deployment) -> str | None:
        return self._endpoints(obj)["webui_url"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_api_base_url(self, obj: Deployment) -> str | None:
        return self._endpoints(obj)["api_base_url"]


class DeploymentCreatedSerializer(DeploymentSerializer):
    api_key = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text=_(
            "Shown once; only its SHA-256 is kept. Null when the answer is an Idempotency-Key replay: "
            "make a new key with regenerate-key if the first answer was lost."
        ),
    )

    class Meta(DeploymentSerializer.Meta):
        fields = [*DeploymentSerializer.Meta.fields, "api_key"]
        read_only_fields = fields


class DeploySerializer(serializers.Serializer):
    app = SlugRelatedField(slug_field="slug", queryset=App.objects.filter(is_active=True))
    model = SlugRelatedField(
        slug_field="repo_id", queryset=ModelEntry.objects.filter(is_active=True), required=False, allow_null=True
    )
    parameters = serializers.DictField(required=False, default=dict)
    region = SlugRelatedField(slug_field="slug", queryset=Region.objects.filter(is_active=True))
    gpu_model = SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.filter(is_active=True))
    gpu_count = serializers.ChoiceField(choices=Instance.GPU_COUNTS)
    volumes = LaunchVolumeSerializer(
        many=True, required=False, help_text="Volumes mounted into the app's instance (training output, a model)."
    )


class RedeploySerializer(serializers.Serializer):
    model = SlugRelatedField(
        slug_field="repo_id", queryset=ModelEntry.objects.filter(is_active=True), required=False, allow_null=True
    )
    parameters = serializers.DictField(required=False, default=dict)


_action_response = {200: DeploymentSerializer, 409: OpenApiResponse(description=_("Not allowed in this state"))}
_key_response = inline_serializer("DeploymentApiKey", {"api_key": serializers.CharField()})


@extend_schema_view(
    list=extend_schema(summary="List your deployments", tags=["deployments"]),
    retrieve=extend_schema(summary="Get one deployment", tags=["deployments"]),
    create=extend_schema(
        summary="Deploy an app",
        tags=["deployments"],
        request=DeploySerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={
            201: DeploymentCreatedSerializer,
            400: OpenApiResponse(description=_("Invalid choice, or the model does not fit")),
            409: OpenApiResponse(description="no_capacity, quota_exceeded or insufficient_funds"),
        },
    ),
    destroy=extend_schema(
        summary="Delete (releases the instance)", tags=["deployments"], responses={204: None, 409: None}
    ),
)
class DeploymentViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = DeploymentSerializer
    lookup_value_converter = "uuid"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return Deployment.objects.none()
        require_permission(
            self.request, Permission.RESOURCES_VIEW, _("Your role in this team does not show its resources.")
        )
        return selectors.deployment_list_for(user=request_acting(self.request)[0])

    def get_object(self, *, operate: bool = False) -> Deployment:
        """The deployment (404 for another account's); 403 when ``operate`` is asked of a person who may
        only see it."""
        deployment = super().get_object()
        require_access(
            self.request,
            owner_id=deployment.owner_id,
            created_by_id=deployment.created_by_id,
            operate=operate,
            message=_("Only the deployment's creator or a team admin can change it."),
        )
        return deployment

    @idempotent(secret_fields=("api_key",))
    def create(self, request, *args, **kwargs):
        require_permission(
            request, Permission.RESOURCES_LAUNCH, _("Your role in this team does not allow deploying apps.")
        )
        body = DeploySerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        data = body.validated_data
        data["volumes"] = [(v["volume"], v["mount_path"], v["mode"]) for v in data.pop("volumes", [])]
        data.setdefault("model", data["app"].default_model)  # left out: the app's default model
        try:
            deployment, key = services.deployment_create(user=request_acting(request)[0], actor=request.user, **data)
        except InstanceError as exc:
            _raise(exc)
        deployment.api_key = key
        data = DeploymentCreatedSerializer(deployment, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        try:
            services.deployment_delete(deployment=self.get_object(operate=True), actor=request.user)
        except InstanceError as exc:
            _raise(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _act(self, verb, **kwargs):
        deployment = self.get_object(operate=True)
        try:
            deployment = verb(deployment=deployment, **kwargs)
        except InstanceError as exc:
            _raise(exc)
        return Response(DeploymentSerializer(deployment, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="Stop (GPUs freed, disk kept)", tags=["deployments"], request=None, responses=_action_response
    )
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        return self._act(services.deployment_stop)

    @extend_schema(summary="Start a stopped deployment", tags=["deployments"], request=None, responses=_action_response)
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        return self._act(services.deployment_start)

    @extend_schema(summary="Restart in place", tags=["deployments"], request=None, responses=_action_response)
    @action(detail=True, methods=["post"])
    def restart(self, request, pk=None):
        return self._act(services.deployment_restart)

    @extend_schema(
        summary="Redeploy with another model or parameters (restarts in place)",
        tags=["deployments"],
        request=RedeploySerializer,
        responses={**_action_response, 400: OpenApiResponse(description=_("Invalid, or does not fit"))},
    )
    @action(detail=True, methods=["post"])
    def redeploy(self, request, pk=None):
        body = RedeploySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        deployment = self.get_object(operate=True)
        model = body.validated_data.get("model", deployment.model)
        return self._act(services.deployment_redeploy, model=model, parameters=body.validated_data["parameters"])

    @extend_schema(
        summary="Make a new API key (the old one stops working)",
        tags=["deployments"],
        request=None,
        responses={200: _key_response},
    )
    @action(detail=True, methods=["post"], url_path="regenerate-key")
    def regenerate_key(self, request, pk=None):
        key = services.deployment_key_regenerate(deployment=self.get_object(operate=True))
        return Response({"api_key": key})
