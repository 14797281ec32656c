"""What a Celery worker wrote on an instance's timeline (in the default language) reads in Chinese on
a zh-Hans page and in the API asked in zh-Hans, and in English on an English page."""

from __future__ import annotations

import pytest
from django.utils import translation

from core.messages import PREFIX


@pytest.mark.django_db
def test_what_a_worker_wrote_reads_in_the_readers_language(rich_alice, client):
    from instances.services import instance_stop
    from instances.tests.conftest import committed, running

    instance = running(rich_alice)
    with translation.override("en"), committed():  # as a Celery worker, in the default language
        instance_stop(instance=instance)
    client.force_login(rich_alice)

    english = client.get(f"/instances/{instance.pk}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Stopped; disk kept" in english
    client.cookies["django_language"] = "zh-hans"
    chinese = client.get(f"/instances/{instance.pk}/").content.decode()
    assert "已关机，磁盘已保留" in chinese and "Stopped; disk kept" not in chinese
    events = client.get(f"/api/v1/instances/{instance.pk}/events/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()["results"]
    assert "已关机，磁盘已保留" in [event["reason"] for event in events]
    assert not any(event["reason"].startswith(PREFIX) for event in events)
