"""Pages draw their icons: an emoji needs a colour-emoji font, which many Linux desktops lack, and shows
there as an empty box (seen on the instance list's empty state at 390 px)."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.template.loader import render_to_string

EMOJI = re.compile("[\U0001f300-\U0001faff\ufe0f]")


def test_no_template_shows_an_emoji():
    found = [
        f"{path.relative_to(settings.BASE_DIR)}:{number}"
        for path in Path(settings.BASE_DIR, "templates").rglob("*.html")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if EMOJI.search(line)
    ]
    assert found == [], f"draw these icons with templates/_icon.html instead: {found}"


def test_every_icon_an_empty_state_names_is_drawn():
    names = {
        name
        for path in Path(settings.BASE_DIR, "templates").rglob("*.html")
        for name in re.findall(r'include "_icon.html" with name="(\w+)"', path.read_text(encoding="utf-8"))
    }
    assert names
    for name in names:
        assert re.search(r"<(path|rect|circle|ellipse) ", render_to_string("_icon.html", {"name": name})), name
