"""A user agent in a few words ("Firefox on Linux"), for the security log: no parser library, no lookups.

Good enough to recognise one's own devices; a user agent says what the client claims, nothing more.
"""

from __future__ import annotations

import re

from django.utils.translation import gettext as _

# First match wins: Edge and Opera also say "Chrome", Chrome also says "Safari".
_BROWSERS = (
    ("gpuctl", re.compile(r"\bgpuctl\b", re.I)),
    ("Edge", re.compile(r"\bEdg(e|A|iOS)?/")),
    ("Opera", re.compile(r"\b(OPR|Opera)/")),
    ("Firefox", re.compile(r"\b(Firefox|FxiOS)/")),
    ("Chrome", re.compile(r"\b(Chrome|CriOS)/")),
    ("Safari", re.compile(r"\bSafari/")),
    ("curl", re.compile(r"^curl/")),
    ("Python", re.compile(r"^(python-requests|python-httpx|Python-urllib|aiohttp)/")),
)
_SYSTEMS = (
    ("Android", re.compile(r"\bAndroid\b")),
    ("iOS", re.compile(r"\b(iPhone|iPad|iPod)\b")),
    ("Windows", re.compile(r"\bWindows\b")),
    ("macOS", re.compile(r"\bMac OS X\b|\bMacintosh\b")),
    ("ChromeOS", re.compile(r"\bCrOS\b")),
    ("Linux", re.compile(r"\bLinux\b")),
)


def user_agent_describe(user_agent: str) -> str:
    """A few words such as "Firefox on Linux" or "curl"; "" for no user agent at all."""
    if not user_agent:
        return ""
    browser = next((name for name, pattern in _BROWSERS if pattern.search(user_agent)), "")
    system = next((name for name, pattern in _SYSTEMS if pattern.search(user_agent)), "")
    if browser and system:
        return _("%(browser)s on %(system)s") % {"browser": browser, "system": system}
    return browser or system or _("Unknown client")
