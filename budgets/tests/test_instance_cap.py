""" "Stop this one after ¥X": an instance that spent its limit is stopped (disk kept), its owner told
once, and it cannot start again until the limit is raised; set from its page, a stranger gets 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from billing.models import Meter
from budgets.models import InstanceCap
from budgets.services import budgets_check, instance_cap_set
from instances.errors import BudgetReached
from instances.models import Instance
from instances.services import instance_start
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed, running

S = Instance.Status


def _used(instance, fen: int) -> None:
    """As settlement records it: what the GPU meter owes so far."""
    Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).update(owed_fen=fen, charged_fen=fen)


@pytest.fixture
def capped(rich_alice):
    instance = running(rich_alice)
    instance_cap_set(instance=instance, limit_fen=5_000)
    return instance


def test_an_instance_under_its_limit_runs_on(capped):
    _used(capped, 4_999)
    assert budgets_check()["stopped"] == 0
    assert Instance.objects.get(pk=capped.pk).status == S.RUNNING


def test_reaching_the_limit_stops_it_keeps_the_disk_and_tells_the_owner_once(capped, mailoutbox):
    _used(capped, 5_000)
    with committed():
        assert budgets_check()["stopped"] == 1
        budgets_check()
    capped.refresh_from_db()
    assert capped.status == S.STOPPED
    assert "spent its limit of ¥50.00" in capped.events.get(new=S.STOPPING).reason_text
    assert len([m for m in mailoutbox if "spent its limit" in m.subject]) == 1
    _used(capped, 5_000)  # the test's figure again: closing the meter settled its (few) real seconds
    with pytest.raises(BudgetReached, match="spent its limit"):
        instance_start(instance=capped)
    instance_cap_set(instance=capped, limit_fen=10_000)
    with committed():
        instance_start(instance=capped)
    assert Instance.objects.get(pk=capped.pk).status in (S.STARTING, S.RUNNING)


def test_the_page_sets_and_removes_the_limit(capped, alice_client):
    url = reverse("budget_instance_cap", args=[capped.pk])
    page = alice_client.get(reverse("instance_detail", args=[capped.pk])).content.decode()
    assert 'id="spending-limit"' in page and 'value="50.00"' in page
    assert alice_client.post(url, {"amount": "80"}).status_code == 302
    assert InstanceCap.objects.get(instance=capped).limit_fen == 8_000
    alice_client.post(url, {"amount": "nonsense"})
    assert InstanceCap.objects.get(instance=capped).limit_fen == 8_000
    alice_client.post(url, {"amount": ""})
    assert not InstanceCap.objects.filter(instance=capped).exists()


def test_a_stranger_cannot_set_a_limit(capped, charlie_client):
    assert charlie_client.post(reverse("budget_instance_cap", args=[capped.pk]), {"amount": "1"}).status_code == 404
    assert InstanceCap.objects.get(instance=capped).limit_fen == 5_000
