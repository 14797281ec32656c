from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PrivacyConfig(AppConfig):
    """Terms and privacy policy (versioned, accepted), the data export, and account deletion."""

    name = "privacy"
    verbose_name = _("Privacy")

    def ready(self) -> None:
        from privacy import signals, tasks  # noqa: F401  (receivers and tasks registered at start-up)
