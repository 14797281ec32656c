from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class InstancesConfig(AppConfig):
    name = "instances"
    verbose_name = _("Instances")

    def ready(self) -> None:
        # Registers the app's tasks with Celery: services enqueue them by name (core.tasks.enqueue_on_commit).
        from instances import tasks  # noqa: F401
