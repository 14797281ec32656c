from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = _("Console")

    def ready(self) -> None:
        from console import (
            checks,  # noqa: F401 (registers the console's system checks)
            logs,  # noqa: F401 (connects the Celery signals that carry the request id into tasks)
            prometheus,  # noqa: F401 (connects the Celery signals that count task outcomes)
        )
        from console.demo import production_demo_parts_refuse  # the app registry is needed to load classes

        # Every process of a production console (web, workers, beat, manage.py) stops here rather
        # than take real sign-ups on simulated parts.
        production_demo_parts_refuse()

        # Which apps answer the proxy's questions (console.hooks; `manage.py hooks` lists every hook).
        from console import wiring

        wiring.wire()
