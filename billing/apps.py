from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    """Billing's periodic tasks (settlement tick, balance alerts, ledger check, trial expiry) are
    added to ``CELERY_BEAT_SCHEDULE`` in billing's block in console/settings/__init__.py, where
    Celery beat reads them before any app is ready."""

    name = "billing"
    verbose_name = _("Billing")

    def ready(self) -> None:
        # Registers the app's tasks with Celery: services enqueue them by name (core.tasks.enqueue_on_commit).
        from billing import (
            checks,  # noqa: F401 - registers the deploy checks (Django's documented pattern)
            tasks,  # noqa: F401
        )
