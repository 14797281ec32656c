"""Template helpers shared by every page: money, durations, navigation state."""

from __future__ import annotations

from django import template
from django.conf import settings
from django.urls import reverse

from console.mail import mailbox_active
from core.formatting import cny, duration

register = template.Library()

# The formatting lives in core so that e-mails, messages and forms use it without a template library.
register.filter("cny", cny)
register.filter("duration", duration)


@register.simple_tag(takes_context=True)
def nav_active(context, prefix: str, unless: str = "") -> str:
    """ "active" on the sidebar link of the page's section; ``unless``: a subsection with a link of its
    own (Images under /instances/), where only that link is."""
    request = context.get("request")
    if request is not None and request.path.startswith(prefix) and not (unless and request.path.startswith(unless)):
        return "active"
    return ""


@register.simple_tag
def dev_mailbox_url() -> str:
    """The development mailbox's address while mail goes to it, else "" (pages that say "check your
    inbox" link it then)."""
    return reverse("dev_mailbox") if mailbox_active() else ""


@register.simple_tag
def live_fallback_poll() -> str:
    """The ``hx-trigger`` of a busy live element: poll every ``CONSOLE_LIVE_FALLBACK_POLL_S`` seconds, but
    only while the page has no live socket (static/js/instances.js sets ``data-live="on"`` once it opens)."""
    every = settings.CONSOLE_LIVE_FALLBACK_POLL_S
    return f"every {every}s [document.documentElement.getAttribute('data-live') !== 'on']"


@register.simple_tag(takes_context=True)
def absolute_url(context, location: str) -> str:
    """``location`` as a full URL (``http://host/path``), for a link a person copies out of the page to
    give someone: a path or a scheme-relative ``//host/path`` means nothing pasted into a chat."""
    request = context.get("request")
    return request.build_absolute_uri(location) if request is not None else location
