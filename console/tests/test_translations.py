"""The zh-Hans catalogue covers every string marked for translation, and the compiled file is current."""

import gettext
import shutil
import subprocess
import sys

import polib
from django.conf import settings
from django.test import Client
from django.utils import translation

PO = settings.BASE_DIR / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
IGNORE = ["-i", ".venv/*", "-i", "staticfiles/*", "-i", "var/*"]  # as `make messages`


def _msgids(po: polib.POFile) -> set[str]:
    return {entry.msgid for entry in po if not entry.obsolete and entry.msgid}


def test_every_entry_is_translated():
    po = polib.pofile(str(PO))
    missing = [e.msgid for e in po if not e.obsolete and (not e.translated() or "fuzzy" in e.flags)]
    assert missing == [], f"{len(missing)} untranslated zh-Hans strings, e.g. {missing[:5]}"


def test_the_catalogue_lists_every_marked_string(tmp_path):
    backup = tmp_path / "django.po"
    shutil.copy(PO, backup)
    try:
        subprocess.run(
            [sys.executable, "manage.py", "makemessages", "-l", "zh_Hans", "--no-obsolete", *IGNORE],
            cwd=settings.BASE_DIR,
            check=True,
            capture_output=True,
        )
        fresh = _msgids(polib.pofile(str(PO)))
    finally:
        shutil.copy(backup, PO)
    committed = _msgids(polib.pofile(str(PO)))
    assert fresh - committed == set(), "strings marked in the code but missing from the catalogue (run make messages)"


def test_the_compiled_catalogue_matches_the_source():
    po = polib.pofile(str(PO))
    with open(MO, "rb") as handle:
        compiled = gettext.GNUTranslations(handle)
    stale = [e.msgid for e in po.translated_entries() if not e.msgid_plural and compiled.gettext(e.msgid) != e.msgstr]
    assert stale == [], f"locale .mo is stale for {stale[:5]} (run make messages)"


def test_pages_render_in_chinese(client: Client, db):
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    response = client.get("/")
    assert "按秒计费" in response.content.decode()
    with translation.override("zh-hans"):
        assert translation.gettext("Dashboard") == "概览"
