from django.urls import path
from rest_framework.routers import SimpleRouter

from accounts import api

router = SimpleRouter()
router.register("ssh-keys", api.SSHKeyViewSet, basename="api-account-ssh-key")
router.register("tokens", api.APITokenViewSet, basename="api-account-token")
router.register("security-events", api.SecurityEventViewSet, basename="api-account-security-event")

urlpatterns = [
    path("profile/", api.ProfileView.as_view(), name="api-account-profile"),
    path("rate-limit/", api.RateLimitView.as_view(), name="api-account-rate-limit"),
    *router.urls,
]
