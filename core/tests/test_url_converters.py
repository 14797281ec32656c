"""``core.urls``' converters match only what their view serves, so a route with one never shadows a
page beside it, in whichever order the routes are tried."""

from __future__ import annotations

import pytest
from django.urls import NoReverseMatch, path, resolve, reverse
from django.urls.exceptions import Resolver404

from core.urls import choice_converter, slug_converter_except


def _view(request, **kwargs):  # pragma: no cover - never called: the tests only resolve
    raise AssertionError


choice_converter("test_verb", ["stop", "keep-running"])
slug_converter_except("test_slug", ["switch", "new"])

urlpatterns = [
    path("things/<test_slug:slug>/", _view, name="thing"),
    path("things/switch/", _view, name="things_switch"),  # after the slug route: still reached
    path("boxes/<int:pk>/<test_verb:verb>/", _view, name="box_verb"),
    path("boxes/<int:pk>/files/", _view, name="box_files"),
]


@pytest.fixture(autouse=True)
def _these_urls(settings):
    settings.ROOT_URLCONF = __name__


def test_a_reserved_word_is_not_a_slug():
    assert resolve("/things/switch/").url_name == "things_switch"
    assert resolve("/things/news/").url_name == "thing"  # a word that only starts like one is a slug
    assert resolve("/things/lab-2/").kwargs == {"slug": "lab-2"}
    with pytest.raises(NoReverseMatch):
        reverse("thing", args=["new"])


def test_a_choice_takes_only_its_words():
    assert resolve("/boxes/1/files/").url_name == "box_files"
    assert resolve("/boxes/1/keep-running/").kwargs == {"pk": 1, "verb": "keep-running"}
    assert reverse("box_verb", args=[1, "stop"]) == "/boxes/1/stop/"
    with pytest.raises(Resolver404):
        resolve("/boxes/1/stopped/")  # no prefix match: the whole segment is one of the words
