"""Fixtures for the storage app: the instances app's simulated fleet and catalogue, volumes, a clock."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from instances.models import Region
from instances.tests.conftest import catalogue, committed, rich_alice, small_fleet, this_host  # noqa: F401
from storage.models import Volume


def make_volume(user, *, region: str = "cn-north-1", size_gb: int = 100, name: str = "") -> Volume:
    """Create a volume and let the (eager) worker make it at the provider."""
    from storage.services import volume_create

    with committed():
        volume = volume_create(
            user=user,
            region=Region.objects.get(slug=region),
            name=name or f"vol-{Volume.objects.count() + 1}",
            size_gb=size_gb,
        )
    volume.refresh_from_db()
    return volume


class Clock:
    """``django.utils.timezone.now`` under the test's control: ``clock.advance(days=1)``."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def clock(monkeypatch):
    from django.utils import timezone

    c = Clock(timezone.now().replace(microsecond=0) - timedelta(days=30))
    monkeypatch.setattr(timezone, "now", c)
    return c
