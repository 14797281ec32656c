from rest_framework.routers import SimpleRouter

from vault import api

router = SimpleRouter()
router.register("secrets", api.SecretViewSet, basename="api-secret")
router.register("registry-credentials", api.RegistryCredentialViewSet, basename="api-registry-credential")

urlpatterns = router.urls
