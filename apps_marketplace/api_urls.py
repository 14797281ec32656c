from rest_framework.routers import SimpleRouter

from apps_marketplace.api import AppViewSet, DatasetEntryViewSet, ModelEntryViewSet
from apps_marketplace.deployment_api import DeploymentViewSet

router = SimpleRouter()
router.register("apps", AppViewSet, basename="api-apps")
router.register("models", ModelEntryViewSet, basename="api-models")
router.register("deployments", DeploymentViewSet, basename="api-deployments")
router.register("datasets", DatasetEntryViewSet, basename="api-datasets")

urlpatterns = router.urls
