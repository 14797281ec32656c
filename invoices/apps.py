from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class InvoicesConfig(AppConfig):
    """发票: users ask for invoices of the money they paid; staff issue or decline them."""

    name = "invoices"
    verbose_name = _("Invoices")
