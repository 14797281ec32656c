"""Identity's tests: texts go to the in-memory outbox; the development inbox, when used, to a temp dir."""

from __future__ import annotations

import pytest

from identity.sms import locmem


@pytest.fixture(autouse=True)
def _texts_in_memory(settings, tmp_path):
    settings.IDENTITY_SMS_SENDER = {"BACKEND": "identity.sms.locmem.LocmemSender", "OPTIONS": {}}
    settings.IDENTITY_PHONE_LOGIN = True
    settings.IDENTITY_DEV_TEXTS_DIR = tmp_path / "texts"
    settings.IDENTITY_DOCUMENTS_DIR = tmp_path / "documents"
    settings.IDENTITY_REAL_NAME_PROVIDER = {"BACKEND": "identity.realname.test.TestRealNameProvider", "OPTIONS": {}}
    locmem.outbox.clear()
    yield
    locmem.outbox.clear()


@pytest.fixture
def outbox() -> list[dict]:
    return locmem.outbox
