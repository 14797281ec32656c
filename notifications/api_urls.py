from django.urls import path
from rest_framework.routers import SimpleRouter

from notifications import api

router = SimpleRouter()
router.register("notifications/webhooks", api.WebhookEndpointViewSet, basename="api-notification-webhook")
router.register("notifications", api.NotificationViewSet, basename="api-notification")

urlpatterns = [
    path("notifications/preferences/", api.PreferencesView.as_view(), name="api-notification-preferences"),
    *router.urls,
]
