from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = _("Accounts")

    def ready(self) -> None:
        # Connects the security log's receivers (log-ins, allauth's password and e-mail changes).
        from accounts import signals  # noqa: F401
