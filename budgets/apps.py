from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BudgetsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "budgets"
    verbose_name = _("budgets")

    def ready(self) -> None:
        # What budgets answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from budgets import (
            tasks,  # noqa: F401  (registers the periodic task)
            wiring,
        )

        wiring.wire()
