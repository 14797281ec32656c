"""A credential's status from its two timestamps (``core.revocable``): revoked wins over expired, and
the expiry's own instant is already expired; API tokens and share links answer alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import APIToken
from core.revocable import Revocable
from ports.models import PortShare

NOW = timezone.now()


@pytest.mark.parametrize("model", [APIToken, PortShare])
@pytest.mark.parametrize(
    ("expires_at", "revoked_at", "status"),
    [
        (None, None, Revocable.Status.ACTIVE),
        (NOW + timedelta(seconds=1), None, Revocable.Status.ACTIVE),
        (NOW, None, Revocable.Status.EXPIRED),  # the expiry's instant is past it
        (NOW - timedelta(days=1), None, Revocable.Status.EXPIRED),
        (NOW - timedelta(days=1), NOW - timedelta(days=2), Revocable.Status.REVOKED),  # revoked wins
        (None, NOW, Revocable.Status.REVOKED),
    ],
)
def test_the_status_follows_the_timestamps(model, expires_at, revoked_at, status):
    credential = model(expires_at=expires_at, revoked_at=revoked_at)
    assert credential.status(NOW) == status
    assert credential.is_active(NOW) is (status == Revocable.Status.ACTIVE)


def test_each_model_keeps_its_own_badge_for_a_revoked_one():
    assert APIToken(revoked_at=NOW).status_badge == "red"  # a revoked token: an alarm
    assert PortShare(revoked_at=NOW).status_badge == ""  # a revoked link: just greyed
    assert APIToken().status_badge == PortShare().status_badge == "green"
