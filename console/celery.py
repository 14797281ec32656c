"""The Celery application: tasks are found in each app's ``tasks`` module."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(sender=None, **kwargs) -> None:
    """Around every task, as Django around every request: close the database connections that are
    older than ``CONN_MAX_AGE`` or broken, keep the others. Celery's own fix-up closed them all twice
    per task, so each task connected anew (and PostgreSQL started a process for it); it is turned off
    in settings (``CELERY_DB_REUSE_MAX``)."""
    if sender is not None and getattr(sender.request, "is_eager", False):
        return  # run in-process (tests, or called eagerly): the caller's connection is not ours to close
    # Local: this module loads from console/__init__.py before Django's settings are configured.
    from django.db import close_old_connections

    close_old_connections()
