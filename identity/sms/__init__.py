"""Loading the configured SMS sender (``IDENTITY_SMS_SENDER``), once per process, like Django's storages."""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from identity.sms.base import SmsSender


@cache
def sender_get() -> SmsSender:
    config = settings.IDENTITY_SMS_SENDER
    return import_string(config["BACKEND"])(**config.get("OPTIONS", {}))


def _reset(*, setting: str, **kwargs) -> None:
    if setting == "IDENTITY_SMS_SENDER":
        sender_get.cache_clear()


setting_changed.connect(_reset)
