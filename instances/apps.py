from django.apps import AppConfig
from django.db.models import signals
from django.utils.translation import gettext_lazy as _


class InstancesConfig(AppConfig):
    name = "instances"
    verbose_name = _("Instances")

    def ready(self) -> None:
        # Registers the app's tasks with Celery: services enqueue them by name (core.tasks.enqueue_on_commit).
        from instances import tasks  # noqa: F401

        # Local: models load after the app registry, so their caches are wired here.
        from instances.catalogue_cache import CATALOGUE_MODELS, catalogue_cache_clear

        for model in CATALOGUE_MODELS:
            # A change made here is seen here at once (staff pages, tests); elsewhere within seconds.
            signals.post_save.connect(catalogue_cache_clear, sender=model, dispatch_uid=f"catalogue-{model.__name__}")
            signals.post_delete.connect(catalogue_cache_clear, sender=model, dispatch_uid=f"catalogue-{model.__name__}")

        # What instances answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from instances import wiring

        wiring.wire()
