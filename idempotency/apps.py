from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class IdempotencyConfig(AppConfig):
    """The prune task's beat entry is in console/settings/__init__.py (idempotency's block), where beat reads it."""

    name = "idempotency"
    verbose_name = _("Idempotency keys")

    def ready(self) -> None:
        from idempotency import tasks  # noqa: F401  (registers the prune task with Celery)
