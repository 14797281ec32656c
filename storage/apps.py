from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = _("Storage")

    def ready(self) -> None:
        # Registers the app's tasks with Celery: services enqueue them by name (core.tasks.enqueue_on_commit).
        from storage import tasks  # noqa: F401
