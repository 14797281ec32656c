"""Enqueueing a task by name, and the base of the tasks that carry one object (an instance, a volume)
through an operation.

A service enqueues the task that will call it back (``instance_stop`` → ``instance_stop_task`` →
``instance_operation_execute``). Importing the tasks module for that would run back up the app's
layers (tasks → services → tasks), so services enqueue by the task's registered name instead::

    enqueue_on_commit("instances.tasks.instance_stop_task", str(instance.pk))

A task that raises and will not run again would leave its object in a busy status ("Provisioning")
with nothing on its page to say why: a bug (a database error, a backend's ``KeyError``) is not one
of the backend's declared errors, so no service handles it, and Celery only logs it. ``OperationTask``
catches what is final (any error but a retry still to come) and hands it to the object's app, which
settles the object through its state machine with the error as its reason; then the error goes on
to Celery, which records the failure as before::

    @shared_task(base=OperationTask, fails="instances.services.instance_operation_fail",
                 fails_during=(S.PROVISIONING,), **RETRY)
    def instance_provision_task(instance_id: str) -> None: ...

``fails`` is the dotted path of a service called with the task's own arguments (by name) and
``error`` (a stored message: the class and message) and ``statuses`` (``fails_during``), the
statuses the task drives: a task that raises after its object moved on (or before its guard looked)
leaves an object that is in another operation alone. The reconciler is the net under this one: what a
killed worker leaves busy is re-driven, then settled after its deadline.
"""

from __future__ import annotations

import inspect
import logging

from celery import Task, current_app
from celery.exceptions import Ignore, Reject, Retry
from django.db import transaction
from django.utils.module_loading import import_string
from django.utils.translation import gettext_noop

from core.messages import reason

logger = logging.getLogger(__name__)


def enqueue_on_commit(name: str, *args, **options) -> None:
    """Send the task registered as ``name`` with ``args`` once the current transaction commits (at
    once outside one), as its ``apply_async`` would, ``options`` included.

    Looked up in Celery's registry when the transaction commits: each app's ``AppConfig.ready``
    imports its tasks module, so the registry holds every task in web and worker processes alike.
    ``apply_async`` on the registered task rather than ``send_task``, so that eager mode (the tests)
    still runs the task in process.
    """
    transaction.on_commit(lambda: current_app.tasks[name].apply_async(args=list(args), **options))


def error_text(exc: BaseException) -> str:
    """What a user is shown of an error: its class and message, never a traceback."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class OperationTask(Task):
    fails: str = ""
    fails_during: tuple[str, ...] = ()

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except (Retry, Ignore, Reject):
            raise  # Celery's own flow: the task runs again, or was told to stop
        except Exception as exc:
            if not self._is_final(exc):
                raise
            self._object_fail(exc, args, kwargs)
            raise

    def _is_final(self, exc: Exception) -> bool:
        """False for an error Celery retries (it calls the task again); True for anything else."""
        if not isinstance(exc, tuple(self.autoretry_for or ())):
            return True
        request = self.request
        if request.called_directly:
            return False  # called as a function: no retries here, the caller decides
        return self.max_retries is not None and request.retries >= self.max_retries

    def _object_fail(self, exc: Exception, args, kwargs) -> None:
        try:
            arguments = inspect.signature(self.run).bind(*args, **kwargs).arguments
        except TypeError:
            arguments = None  # called with the wrong arguments: there is no object to settle
        retried = isinstance(exc, tuple(self.autoretry_for or ()))
        error = error_text(exc)
        if retried:
            error = reason(
                gettext_noop("%(error)s (still failing after %(n)d attempts)"), error=error, n=self.request.retries + 1
            )
        # The operator's view: the whole traceback, with the object it was working on.
        logger.error("%s%s failed for good: %s", self.name, list(args), error_text(exc), exc_info=exc)
        if not self.fails or arguments is None:
            return
        try:
            import_string(self.fails)(**arguments, error=error, statuses=tuple(self.fails_during))
        except Exception:
            # Never hide the task's own error; the reconciler settles the object after its deadline.
            logger.exception("%s%s: could not settle its object after the error", self.name, list(args))
