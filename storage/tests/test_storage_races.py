"""Concurrent requests on PostgreSQL with real threads: eight instances racing to attach one volume
read-write get one writer; ten creates racing for the last of the storage quota never exceed it."""

from __future__ import annotations

import pytest
from django.db import connection

from core.testing import race
from instances.errors import InstanceError
from instances.models import Region
from instances.tests.conftest import fund, running
from storage import services
from storage.models import Volume, VolumeAttachment
from storage.tests.conftest import make_volume

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("row locks are the point: PostgreSQL only")


def test_eight_instances_racing_to_write_one_volume_get_one_writer(alice, catalogue):
    fund(alice, 1_000_000)
    volume = make_volume(alice, name="contended")
    instances = [running(alice) for _ in range(8)]
    won, refused, errors = race(
        lambda i: services.volume_attach(
            user=alice, volume=volume, instance=instances[i], mount_path="/mnt/w", mode="rw"
        ),
        threads=8,
        refusals=(InstanceError,),
        timeout=60,
    )
    assert errors == []
    assert len(won) == 1 and len(refused) == 7
    assert all(isinstance(exc, services.AttachmentConflict) for _i, exc in refused)
    assert VolumeAttachment.objects.filter(volume=volume, mode="rw").count() == 1


def test_ten_creates_racing_for_the_quota_never_exceed_it(alice, catalogue, settings):
    fund(alice, 1_000_000)
    settings.STORAGE_VOLUME_QUOTA_GB = 500
    region = Region.objects.get(slug="cn-north-1")
    won, refused, errors = race(
        lambda i: services.volume_create(user=alice, region=region, name=f"race-{i}", size_gb=100),
        threads=10,
        refusals=(InstanceError,),
        timeout=60,
    )
    assert errors == []
    assert (len(won), len(refused)) == (5, 5)
    assert all(isinstance(exc, services.StorageQuotaExceeded) for _i, exc in refused)
    assert sum(Volume.objects.values_list("size_gb", flat=True)) == 500
