from django.urls import path
from rest_framework.routers import SimpleRouter

from apps_marketplace.api import AppViewSet, DatasetEntryViewSet, DeploymentViewSet, ModelEntryViewSet
from apps_marketplace.views import deployment_readiness

router = SimpleRouter()
router.register("apps", AppViewSet, basename="api-apps")
router.register("models", ModelEntryViewSet, basename="api-models")
router.register("deployments", DeploymentViewSet, basename="api-deployments")
router.register("datasets", DatasetEntryViewSet, basename="api-datasets")

# A plain view: the deployment's own key authorises it, not the console's session or API tokens.
urlpatterns = [
    path("deployments/<uuid:deployment_id>/readiness/", deployment_readiness, name="deployment_readiness"),
    *router.urls,
]
