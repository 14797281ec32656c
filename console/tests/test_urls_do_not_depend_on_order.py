"""No URL of the console's own is matched by two routes, so the order of ``console/urls.py``'s includes
does not matter: an app's catch-all cannot swallow another app's route, whichever is included first.

Each route of the project's apps is turned into a concrete path (a sample value per converter) and
matched against every other route; more than one match is an order dependence. Django's admin, the
i18n views and the API's JSON 404 (a deliberate last resort, ``re_path(r"^api/")``) are left out.
"""

from __future__ import annotations

import re
import uuid

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

from console import urls as console_urls
from core.drf import json_not_found

PROJECT_APPS = {
    "accounts",
    "apps_marketplace",
    "billing",
    "budgets",
    "console",
    "devicelogin",
    "gateway",
    "instances",
    "invoices",
    "metrics",
    "notifications",
    "ports",
    "storage",
    "teams",
}
# A sample value for a converter: the first of these its regex takes whole (a verb for the instance
# actions', the saved images' and the snapshots' converters, a slug for the others).
CANDIDATES = (str(uuid.UUID(int=7)), "7", "sample-slug", "stop", "share", "delete", "a/b")
CONVERTER = re.compile(r"<(?:[^>:]+:)?(?P<name>[^>]+)>")


def _regex(pattern) -> str:
    """A pattern's regex without its anchors, to be joined to its includes' prefixes."""
    text = pattern.regex.pattern
    return text.removeprefix("^").removesuffix(r"\Z").removesuffix("$")


def _candidate(converter) -> str:
    return next(value for value in CANDIDATES if re.fullmatch(converter.regex, value))


def _sample(pattern) -> str | None:
    """A path the pattern matches, or None for a regex route (their groups have no sample here)."""
    if isinstance(pattern, RoutePattern):
        return CONVERTER.sub(lambda m: _candidate(pattern.converters[m["name"]]), str(pattern))
    if isinstance(pattern, RegexPattern) and not re.search(r"[(\[\\.*+?|]", _regex(pattern)):
        return _regex(pattern)
    return None


def _leaves(patterns, prefix_regex: str = "", prefix_sample: str | None = ""):
    for entry in patterns:
        sample = _sample(entry.pattern)
        full_sample = None if prefix_sample is None or sample is None else prefix_sample + sample
        full_regex = prefix_regex + _regex(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _leaves(entry.url_patterns, full_regex, full_sample)
        elif isinstance(entry, URLPattern):
            yield entry, re.compile(full_regex + r"\Z"), full_sample


def _ours(entry: URLPattern) -> bool:
    callback = entry.callback
    if callback is json_not_found:
        return False
    module = getattr(callback, "cls", callback).__module__
    return module.split(".")[0] in PROJECT_APPS


def test_no_project_url_is_matched_by_two_routes():
    leaves = [(entry, regex, sample) for entry, regex, sample in _leaves(console_urls.urlpatterns) if _ours(entry)]
    assert len(leaves) > 100  # the walk reached every app's routes

    overlaps = []
    for *_, sample in leaves:
        if sample is None:
            continue
        matches = [other.name or str(other.pattern) for other, regex, _ in leaves if regex.match(sample)]
        if len(matches) > 1:
            overlaps.append((sample, matches))
    assert overlaps == [], "\n".join(map(str, overlaps))


def test_each_route_resolves_to_itself():
    """The same from Django's side: each sample path resolves to the route it was made from."""
    resolver = get_resolver()
    for entry, _, sample in _leaves(console_urls.urlpatterns):
        if sample is None or not _ours(entry):
            continue
        assert resolver.resolve("/" + sample).func == entry.callback, sample
