from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PortsConfig(AppConfig):
    name = "ports"
    verbose_name = _("Service ports")
    default_auto_field = "django.db.models.BigAutoField"
