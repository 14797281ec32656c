"""``manage.py hooks`` lists every hook with what answers it, and ARCHITECTURE.md shows that very table.

The table is "who calls whom at run time": each place a lower app asks a higher one. It is written
from the registry, so the document cannot drift from the code; when a hook is added, moved or
answered by another app, paste the command's output into ARCHITECTURE.md.
"""

from __future__ import annotations

import io
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from core.hooks import hooks_discover

ARCHITECTURE = Path(settings.BASE_DIR) / "ARCHITECTURE.md"


def _listing() -> str:
    out = io.StringIO()
    call_command("hooks", stdout=out)
    return out.getvalue()


def test_architecture_shows_the_hooks_command_output():
    listing = _listing()
    assert listing in ARCHITECTURE.read_text(), "ARCHITECTURE.md's hooks table differs: paste `manage.py hooks`"


def test_every_hook_is_listed_with_where_it_is_declared_and_who_answers():
    listing = _listing()
    hooks = hooks_discover()
    # Each installed app that asks the apps above has declared at least one hook.
    assert {h.module for h in hooks} >= {
        "accounts.hooks",
        "billing.hooks",
        "console.hooks",
        "instances.hooks",
        "notifications.hooks",
        "teams.hooks",
    }
    for hook in hooks:
        assert f"| `{hook.name}` |" in listing
        # In this configuration every question has an answer from an app above (none is left to the fallback).
        assert hook.implementations, f"{hook.name} has no implementation"


def test_the_settings_name_no_hook():
    names = [name for name in dir(settings) if name.endswith(("_HOOK", "_HOOKS", "_RESOLVER", "_GUARD", "_PANELS"))]
    assert names == []
