from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PortsConfig(AppConfig):
    name = "ports"
    verbose_name = _("Service ports")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # What ports answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from ports import wiring

        wiring.wire()
