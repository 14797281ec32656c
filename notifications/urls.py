from django.urls import path

from notifications import views

urlpatterns = [
    path("", views.inbox, name="notifications"),
    path("read/", views.mark_read, name="notifications_mark_read"),
    path("<int:pk>/", views.open_notification, name="notification_open"),
    path("preferences/", views.preferences, name="notification_preferences"),
    path("webhooks/", views.webhook_create, name="notification_webhook_create"),
    path("webhooks/<uuid:pk>/delete/", views.webhook_delete, name="notification_webhook_delete"),
    path("webhooks/<uuid:pk>/toggle/", views.webhook_toggle, name="notification_webhook_toggle"),
    path("webhooks/<uuid:pk>/test/", views.webhook_test, name="notification_webhook_test"),
]
