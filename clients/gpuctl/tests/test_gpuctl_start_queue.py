"""gpuctl against a live console: ``start --wait`` waits in line when no cards are free, ``leave-queue``
leaves; the SDK's ``instances_start`` takes the same ``{"wait": True}``."""

from __future__ import annotations

import pytest
from gpuctl import Client

pytestmark = pytest.mark.django_db(transaction=True)

BIG = ("launch", "--gpu", "h800", "--count", "8", "--region", "cn-north-1", "--image", "pytorch-2.5-cu124")


@pytest.fixture
def no_cards(console, gpuctl, settings, bob):
    """Alice's stopped 8 × H800 instance "big"; bob's holds the only H800 node."""
    from instances.tests.conftest import fund, running

    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    launched = gpuctl("--json", *BIG, "--name", "big")
    assert launched.code == 0, launched.stdout + launched.stderr
    assert gpuctl("--json", "stop", "big").json()["status"] == "stopped"
    fund(bob, 1_000_000)
    running(bob, gpu="h800", count=8)
    return launched.json()


def test_start_without_wait_is_refused_for_lack_of_cards(no_cards, gpuctl):
    run = gpuctl("--json", "start", "big")

    assert run.code == 4
    assert run.json()["error"]["code"] == "no_capacity"


def test_start_wait_queues_it_and_leave_queue_leaves(no_cards, gpuctl):
    queued = gpuctl("--json", "start", "big", "--wait")
    assert queued.code == 0, queued.stdout + queued.stderr
    assert queued.json()["status"] == "stopped"
    assert queued.json()["queue_position"] == 1 and queued.json()["start_queued_at"]

    told = gpuctl("start", "big", "--wait")  # asking again keeps its place, and says so to people
    assert told.code == 0 and "waiting in line for cards" in told.stdout and "(position 1)" in told.stdout

    left = gpuctl("--json", "leave-queue", "big")
    assert left.code == 0
    assert (left.json()["queue_position"], left.json()["start_queued_at"]) == (None, None)
    assert "left the line" in gpuctl("leave-queue", "big").stdout


def test_the_sdk_starts_with_wait(no_cards, console):
    sdk = Client(console["url"], console["token"])

    instance = sdk.instances_start(no_cards["id"], {"wait": True})

    assert instance["queue_position"] == 1
    assert sdk.instances_leave_queue(no_cards["id"])["queue_position"] is None
