from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class NotificationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "notifications"
    verbose_name = _("notifications")

    def ready(self) -> None:
        from notifications import tasks  # noqa: F401  (registers the webhook delivery task)
