from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = _("Storage")

    def ready(self) -> None:
        # Registers the app's tasks with Celery: services enqueue them by name (core.tasks.enqueue_on_commit).
        # What storage answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from storage import (
            tasks,  # noqa: F401
            wiring,
        )

        wiring.wire()
