from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SimulatedCloudConfig(AppConfig):
    name = "providers.simulated"
    label = "providers_simulated"
    verbose_name = _("Simulated cloud")
