"""Helpers for the zh-Hans catalogue (locale/zh_Hans/LC_MESSAGES/django.po).

    python scripts/i18n.py todo [--limit N]     untranslated or fuzzy entries, as JSON {msgid: ""}
    python scripts/i18n.py apply FILE.json      write translations {msgid: msgstr} into the catalogue
    python scripts/i18n.py prefill              take translations Django, allauth and DRF already ship

Plural entries appear in `todo` as {"msgid|msgid_plural": ""}; Chinese has one plural form, so one
msgstr serves both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
PLURAL_SEP = "|"


def _key(entry: polib.POEntry) -> str:
    return f"{entry.msgid}{PLURAL_SEP}{entry.msgid_plural}" if entry.msgid_plural else entry.msgid


def _needs_work(entry: polib.POEntry) -> bool:
    if entry.obsolete:
        return False
    if "fuzzy" in entry.flags:
        return True
    if entry.msgid_plural:
        return not entry.msgstr_plural or not all(entry.msgstr_plural.values())
    return not entry.msgstr


def _set(entry: polib.POEntry, text: str) -> None:
    if entry.msgid_plural:
        entry.msgstr_plural = {0: text}
    else:
        entry.msgstr = text
    if "fuzzy" in entry.flags:
        entry.flags.remove("fuzzy")
        entry.previous_msgid = None
        entry.previous_msgid_plural = None
        entry.previous_msgctxt = None


def todo(limit: int | None) -> None:
    po = polib.pofile(str(CATALOGUE))
    items = {_key(e): "" for e in po if _needs_work(e)}
    if limit:
        items = dict(list(items.items())[:limit])
    json.dump(items, sys.stdout, ensure_ascii=False, indent=1)
    print()


def apply(path: str) -> None:
    translations = json.loads(Path(path).read_text(encoding="utf-8"))
    po = polib.pofile(str(CATALOGUE))
    applied = 0
    for entry in po:
        text = translations.get(_key(entry))
        if isinstance(text, list):  # a plural given as its forms: Chinese has one
            text = text[0] if text else ""
        if text:
            _set(entry, text)
            applied += 1
    po.save()
    print(f"applied {applied} of {len(translations)}; {sum(_needs_work(e) for e in po)} entries still need work")


def prefill() -> None:
    import allauth
    import django
    import rest_framework

    sources = [
        Path(django.__file__).parent / "conf" / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po",
        Path(allauth.__file__).parent / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po",
        Path(rest_framework.__file__).parent / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po",
    ]
    known: dict[str, str] = {}
    for source in sources:
        if source.exists():
            for entry in polib.pofile(str(source)):
                text = entry.msgstr or (entry.msgstr_plural or {}).get(0, "")
                if text and "fuzzy" not in entry.flags:
                    known.setdefault(_key(entry), text)
    po = polib.pofile(str(CATALOGUE))
    filled = 0
    for entry in po:
        if _needs_work(entry) and _key(entry) in known:
            _set(entry, known[_key(entry)])
            filled += 1
    po.save()
    print(f"prefilled {filled}; {sum(_needs_work(e) for e in po)} entries still need work")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "todo"
    if command == "todo":
        limit = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--limit" else None
        todo(limit)
    elif command == "apply":
        apply(sys.argv[2])
    elif command == "prefill":
        prefill()
    else:
        sys.exit(__doc__)
