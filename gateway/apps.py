from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = _("SSH gateway")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # What gateway answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from gateway import wiring

        wiring.wire()
