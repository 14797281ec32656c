from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = _("Accounts")

    def ready(self) -> None:
        # Connects the receivers of the security log (log-ins, allauth's password and e-mail changes) and
        # of the user's language (log-in and sign-up): importing the modules is what connects them.
        from accounts import language, signals  # noqa: F401
