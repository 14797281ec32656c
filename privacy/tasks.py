"""Privacy's tasks: thin wrappers over services that are safe to repeat (each claims its row first)."""

from __future__ import annotations

from celery import shared_task
from django.utils.translation import gettext as _

from privacy import services


@shared_task(acks_late=True, ignore_result=True)
def data_export_build_task(export_id: int) -> bool:
    try:
        return services.data_export_build(export_id=export_id)
    except Exception:
        # Left "building" the user could never ask again; failed, they can (and the error is logged).
        services.data_export_fail(export_id=export_id, error=_("The export could not be built: try again later."))
        raise


@shared_task(acks_late=True, ignore_result=True)
def data_exports_expire_task() -> int:
    return services.data_exports_expire()


@shared_task(acks_late=True, ignore_result=True)
def deletions_due_task() -> int:
    return services.deletions_due()
