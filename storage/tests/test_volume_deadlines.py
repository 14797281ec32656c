"""Nothing stays busy for ever: the periodic refresh re-drives a volume whose task was lost after
``INSTANCES_REDRIVE_AFTER_S``, and settles it with why past ``INSTANCES_OPERATION_TIMEOUT_S``, whether
or not the provider answers. Time passes by moving ``status_changed_at`` back."""

from datetime import timedelta

from django.utils import timezone

from billing.models import Meter
from instances.models import Region
from instances.tests.conftest import committed, simulate
from storage import services, tasks
from storage.models import Volume
from storage.selectors import volume_meter_ref
from storage.tests.conftest import make_volume

V = Volume.Status


def _record_enqueued(monkeypatch) -> list:
    """From now on, the volume tasks enqueued (name, volume id), recorded instead of run."""
    sent = []
    for name in ("volume_create_task", "volume_resize_task", "volume_delete_task"):
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "apply_async", lambda args=None, name=name, **kw: sent.append((name, args[0])))
    return sent


def _age(volume, seconds: int) -> None:
    Volume.objects.filter(pk=volume.pk).update(status_changed_at=timezone.now() - timedelta(seconds=seconds + 1))


def _refresh() -> dict:
    with committed():
        return services.volumes_refresh()


def test_every_busy_status_has_a_status_to_settle_in_that_the_table_allows():
    assert set(services._SETTLES_AT) == set(Volume.BUSY)
    assert all(dst in services.ALLOWED[src] for src, dst in services._SETTLES_AT.items())


def test_a_create_whose_task_was_lost_is_redriven_then_failed_at_its_deadline(rich_alice, settings, monkeypatch):
    volume = services.volume_create(user=rich_alice, region=Region.objects.get(slug="cn-north-1"), name="d", size_gb=9)
    enqueued = _record_enqueued(monkeypatch)

    assert _refresh()["redriven"] == 1
    assert enqueued == [("volume_create_task", str(volume.pk))]

    _age(volume, settings.INSTANCES_OPERATION_TIMEOUT_S)
    with simulate(UNREACHABLE=True):
        report = _refresh()
    assert (report["overdue"], report["redriven"]) == (1, 0)  # settled, not sent again
    volume.refresh_from_db()
    assert volume.status == V.FAILED
    assert volume.status_reason_text == "The provider did not create it within 10 minutes"
    assert not Meter.objects.filter(ref=volume_meter_ref(volume.pk)).exists()


def test_a_resize_whose_task_was_lost_is_redriven_then_given_up_at_its_deadline(rich_alice, settings, monkeypatch):
    volume = make_volume(rich_alice, size_gb=100)
    services.volume_resize(volume=volume, size_gb=300)  # the resize task never ran
    enqueued = _record_enqueued(monkeypatch)

    _refresh()
    assert enqueued == [("volume_resize_task", str(volume.pk))]

    _age(volume, settings.INSTANCES_OPERATION_TIMEOUT_S)
    _refresh()
    volume.refresh_from_db()
    assert (volume.status, volume.size_gb, volume.resize_to_gb) == (V.AVAILABLE, 100, None)
    assert volume.status_reason_text == "The resize did not finish within 10 minutes. The size is unchanged."


def test_a_delete_whose_task_was_lost_is_redriven_then_failed_at_its_deadline(rich_alice, settings, monkeypatch):
    volume = make_volume(rich_alice)
    services.volume_delete(volume=volume)  # the delete task never ran
    enqueued = _record_enqueued(monkeypatch)

    _refresh()
    assert enqueued == [("volume_delete_task", str(volume.pk))]

    _age(volume, settings.INSTANCES_OPERATION_TIMEOUT_S)
    _refresh()
    volume.refresh_from_db()
    assert volume.status == V.FAILED
    assert volume.status_reason_text == "The provider did not delete it within 10 minutes. Delete it again to retry."
    assert volume.can_delete()


def test_a_volume_whose_usage_raises_holds_up_no_other(rich_alice):
    make_volume(rich_alice)
    make_volume(rich_alice)
    with simulate(BUG_IN=["volume_usage"]):
        assert _refresh()["measured"] == 0
    assert _refresh()["measured"] == 2
