from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AppsMarketplaceConfig(AppConfig):
    name = "apps_marketplace"
    verbose_name = _("App marketplace")
