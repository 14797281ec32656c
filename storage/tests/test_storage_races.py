"""Concurrent requests on PostgreSQL with real threads: eight instances racing to attach one volume
read-write get one writer; ten creates racing for the last of the storage quota never exceed it."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from instances.errors import InstanceError
from instances.tests.conftest import fund, running
from storage import services
from storage.models import Volume, VolumeAttachment
from storage.tests.conftest import make_volume

pytestmark = pytest.mark.django_db(transaction=True)


def _race(n: int, work) -> tuple[list, list, list]:
    barrier = threading.Barrier(n)
    won, refused, errors = [], [], []

    def racer(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            try:
                won.append(work(i))
            except InstanceError as exc:
                refused.append(exc)
        except Exception as exc:  # reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return won, refused, errors


@pytest.fixture(autouse=True)
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("row locks are the point: PostgreSQL only")


def test_eight_instances_racing_to_write_one_volume_get_one_writer(alice, catalogue):
    fund(alice, 1_000_000)
    volume = make_volume(alice, name="contended")
    instances = [running(alice) for _ in range(8)]
    won, refused, errors = _race(
        8,
        lambda i: services.volume_attach(
            user=alice, volume=volume, instance=instances[i], mount_path="/mnt/w", mode="rw"
        ),
    )
    assert errors == []
    assert len(won) == 1 and len(refused) == 7
    assert all(isinstance(exc, services.AttachmentConflict) for exc in refused)
    assert VolumeAttachment.objects.filter(volume=volume, mode="rw").count() == 1


def test_ten_creates_racing_for_the_quota_never_exceed_it(alice, catalogue, settings):
    from instances.models import Region

    fund(alice, 1_000_000)
    settings.STORAGE_VOLUME_QUOTA_GB = 500
    region = Region.objects.get(slug="cn-north-1")
    won, refused, errors = _race(
        10, lambda i: services.volume_create(user=alice, region=region, name=f"race-{i}", size_gb=100)
    )
    assert errors == []
    assert (len(won), len(refused)) == (5, 5)
    assert all(isinstance(exc, services.StorageQuotaExceeded) for exc in refused)
    assert sum(Volume.objects.values_list("size_gb", flat=True)) == 500
