"""Messages stored now and translated when shown: status reasons, timeline entries.

A reason is written by whoever moves an instance or a volume: a web request in the user's language,
or a Celery worker in the default one. Stored as finished text, a zh-Hans page would show what a
worker wrote in English (and an English page what a Chinese request wrote). So a reason is stored as
its message id and parameters, and translated into the reader's language when a page or the API
shows it:

    reason(gettext_noop("Booted on %(node)s"), node="gpu-01")   # what services store
    shown(instance.status_reason)                                # what pages and the API show

``gettext_noop`` at the call site is what puts the message in the catalogue (``make messages``).
Parameters may themselves be stored reasons ("Launch failed: %(r)s"); they are translated in turn.
Text that is not a stored reason (a provider's own words, rows written before this existed) is
shown as it is.
"""

from __future__ import annotations

import json

from django.utils.translation import gettext

PREFIX = "i18n:"
PARAM_LIMIT = 500  # characters kept of a text parameter (a provider's error, a log tail)


def reason(message: str, **params) -> str:
    """``message`` (marked with ``gettext_noop``) and its parameters, to store and translate later."""
    kept = {
        key: (value[:PARAM_LIMIT] if isinstance(value, str) and not value.startswith(PREFIX) else value)
        for key, value in params.items()
    }
    kept = {key: value if isinstance(value, int | float | str) else str(value) for key, value in kept.items()}
    return PREFIX + json.dumps({"m": message, "p": kept}, ensure_ascii=False, separators=(",", ":"))


def shown(text: str | None) -> str:
    """A stored reason in the active language; any other text as it is."""
    if not text or not text.startswith(PREFIX):
        return text or ""
    try:
        data = json.loads(text[len(PREFIX) :])
        message = data["m"]
        params = {key: shown(value) if isinstance(value, str) else value for key, value in data.get("p", {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return text
    translated = gettext(message)
    if not params:
        return translated
    try:
        return translated % params
    except (KeyError, TypeError, ValueError):
        try:
            return message % params  # a translation that lost a placeholder: the English one
        except (KeyError, TypeError, ValueError):
            return message
