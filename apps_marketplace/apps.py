from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AppsMarketplaceConfig(AppConfig):
    name = "apps_marketplace"
    verbose_name = _("App marketplace")

    def ready(self) -> None:
        # What apps_marketplace answers for the apps below it (core.hooks; `manage.py hooks` lists them all).
        from apps_marketplace import wiring

        wiring.wire()
