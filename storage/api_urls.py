from rest_framework.routers import SimpleRouter

from storage import api

router = SimpleRouter()
router.register("volumes", api.VolumeViewSet, basename="api-volume")

urlpatterns = router.urls
