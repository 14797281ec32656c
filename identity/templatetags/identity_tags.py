"""Identity's template helpers: whether log-in by mobile number is offered, where the texts inbox is."""

from __future__ import annotations

from django import template
from django.conf import settings
from django.urls import reverse

from identity.normalise import phone_mask
from identity.sms.dev import inbox_active

register = template.Library()


@register.simple_tag
def phone_login_url() -> str:
    """The mobile log-in page's address when a sender is configured, else "" (no link shown)."""
    return reverse("identity_phone_login") if settings.IDENTITY_PHONE_LOGIN else ""


@register.simple_tag
def dev_texts_url() -> str:
    """The development texts inbox while texts go to it, else ""."""
    return reverse("dev_texts") if inbox_active() else ""


@register.filter
def masked_phone(number: str) -> str:
    return phone_mask(number or "")
