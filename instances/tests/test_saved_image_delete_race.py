"""A saved image deleted while a launch of it is under way, on PostgreSQL with real threads: the launch
holds the image until it commits its instance, so the delete either sees that instance (409) or the
launch sees the delete (refused); never an instance of a deleted image."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from instances.catalogue import catalogue_seed
from instances.errors import ImageInUse, LaunchInvalid
from instances.models import Image, Instance
from instances.services import image_save
from instances.services.images import image_delete
from instances.tests.conftest import committed, fund, launch, running
from providers.local.tests.local_helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def image(settings, django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are the point: PostgreSQL only")
    catalogue_seed()
    alice = django_user_model.objects.create_user(email="alice@example.com", password="x" * 12)
    fund(alice, 1_000_000)
    source = running(alice)
    with committed():
        saved = image_save(instance=source, actor=alice, name="my-env", tag="v1")
    saved.refresh_from_db()
    assert saved.status == Image.Status.READY
    return saved


def _a_statement_waits_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


def _in_thread(work) -> dict:
    """Run ``work`` in a thread of its own (its own connection); the dict gets its result or error."""
    out: dict = {}

    def run():
        try:
            out["result"] = work()
        except Exception as exc:  # the test reads it
            out["error"] = exc
        finally:
            connection.close()

    out["thread"] = threading.Thread(target=run)
    out["thread"].start()
    return out


def test_a_delete_waits_for_a_launch_holding_the_image_then_is_refused(image, monkeypatch):
    locked, go = threading.Event(), threading.Event()
    import instances.services.launch as launching

    real_quota_check = launching.quota_check

    def paused_quota_check(**kwargs):  # runs right after the launch locked the image
        locked.set()
        assert go.wait(30)
        return real_quota_check(**kwargs)

    monkeypatch.setattr(launching, "quota_check", paused_quota_check)
    launcher = _in_thread(lambda: launch(image.owner, image=image.slug))
    assert locked.wait(30)
    deleter = _in_thread(lambda: image_delete(image=Image.objects.get(pk=image.pk)))
    wait_until(_a_statement_waits_for_a_lock, timeout=30, interval=0.05, what="the delete to wait for the lock")
    assert deleter["thread"].is_alive()  # it waits for the launch's commit

    go.set()
    launcher["thread"].join(30)
    deleter["thread"].join(30)

    assert "error" not in launcher, launcher.get("error")
    assert isinstance(deleter.get("error"), ImageInUse)
    assert Image.objects.get(pk=image.pk).status == Image.Status.READY
    assert Instance.objects.filter(image=image).exclude(pk=image.source_instance_id).count() == 1


def test_a_launch_that_read_the_image_before_a_delete_committed_is_refused(image, monkeypatch):
    read, go = threading.Event(), threading.Event()
    import instances.services.launch as launching

    real_nodes_ensure = launching._nodes_ensure

    def paused_nodes_ensure(**kwargs):  # after the launch checked the image, before its transaction
        read.set()
        assert go.wait(30)
        return real_nodes_ensure(**kwargs)

    monkeypatch.setattr(launching, "_nodes_ensure", paused_nodes_ensure)
    ready = Image.objects.get(pk=image.pk)
    launcher = _in_thread(lambda: launch(image.owner, image=ready.slug))
    assert read.wait(30)
    with committed():
        image_delete(image=Image.objects.get(pk=image.pk))
    go.set()
    launcher["thread"].join(30)

    assert isinstance(launcher.get("error"), LaunchInvalid), launcher
    assert not Instance.objects.filter(image=image).exclude(pk=image.source_instance_id).exists()
