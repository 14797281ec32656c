"""Reasons are stored as message ids and parameters and shown in the reader's language: what a Celery
worker wrote (in the default language) reads in Chinese on a zh-Hans page and in English on an English
one, through the pages and the API alike."""

from __future__ import annotations

from django.utils import translation
from django.utils.translation import gettext_noop

from core.messages import PREFIX, reason, shown


def test_a_stored_reason_is_translated_when_shown_with_nested_reasons_and_plain_text():
    booted = reason(gettext_noop("Booted on %(node)s"), node="gpu-01")
    failed = reason(gettext_noop("Launch failed: %(r)s"), r=reason(gettext_noop("Launch was interrupted")))
    with translation.override("en"):
        assert shown(booted) == "Booted on gpu-01"
        assert shown(failed) == "Launch failed: Launch was interrupted"
    with translation.override("zh-hans"):
        assert shown(booted) == "已在 gpu-01 上启动"
        assert "gpu-01" not in shown(failed) and shown(failed) != "Launch failed: Launch was interrupted"
    # A provider's own words and rows written before stored messages are shown as they are.
    assert shown("Queued: position 2, reason Resources") == "Queued: position 2, reason Resources"
    assert shown(PREFIX + "{not json") == PREFIX + "{not json"
    assert shown("") == "" and shown(None) == ""


def test_a_long_parameter_is_cut_but_the_stored_reason_stays_readable():
    text = reason(gettext_noop("Start failed: %(r)s"), r="x" * 5000)
    assert shown(text).startswith("Start failed: xxx") and len(shown(text)) < 600
