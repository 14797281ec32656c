"""Path converters that keep one app's routes from shadowing each other, whatever their order.

Django tries routes in order, so a catch-all such as ``<slug:action>/`` placed first would swallow a
page of its own app, or of another app included under the same prefix. A converter that matches only
what its view serves (``choice_converter``), or never a reserved word (``slug_converter_except``),
makes each URL match one route: ``console/tests/test_urls_do_not_depend_on_order.py`` checks it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.urls import register_converter


class _StrConverter:
    regex = ""

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


def choice_converter(name: str, choices: Iterable[str]) -> None:
    """Register converter ``name``: exactly one of ``choices`` (a view's fixed verbs)."""
    regex = "|".join(re.escape(choice) for choice in sorted(choices, key=len, reverse=True))
    register_converter(type(name, (_StrConverter,), {"regex": f"(?:{regex})"}), name)


def slug_converter_except(name: str, reserved: Iterable[str]) -> None:
    """Register converter ``name``: a slug that is none of ``reserved`` (pages beside the slug's)."""
    words = "|".join(re.escape(word) for word in sorted(reserved))
    register_converter(type(name, (_StrConverter,), {"regex": rf"(?!(?:{words})(?:/|$))[-a-zA-Z0-9_]+"}), name)
