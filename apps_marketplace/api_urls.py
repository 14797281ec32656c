from rest_framework.routers import SimpleRouter

from apps_marketplace.api import AppViewSet, DatasetEntryViewSet, ModelEntryViewSet

router = SimpleRouter()
router.register("apps", AppViewSet, basename="api-apps")
router.register("models", ModelEntryViewSet, basename="api-models")
router.register("datasets", DatasetEntryViewSet, basename="api-datasets")

urlpatterns = router.urls
