from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MetricsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "metrics"
    verbose_name = _("GPU metrics")

    def ready(self) -> None:
        # What metrics answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from metrics import (
            tasks,  # noqa: F401  (registers the periodic tasks)
            wiring,
        )

        wiring.wire()
