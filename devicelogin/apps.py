from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DeviceLoginConfig(AppConfig):
    name = "devicelogin"
    verbose_name = _("Device log-in")

    def ready(self) -> None:
        from devicelogin import tasks  # noqa: F401  (registers the periodic task)
