from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TeamsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "teams"
    verbose_name = _("teams")

    def ready(self) -> None:
        # What teams answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from teams import (
            tasks,  # noqa: F401  (registers the periodic task)
            wiring,
        )

        wiring.wire()
