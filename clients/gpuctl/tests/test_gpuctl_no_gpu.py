"""``gpuctl start --no-gpu``: a stopped instance runs without cards, and a plain start takes them again."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

LAUNCH = ("launch", "--gpu", "a800-80g", "--region", "cn-north-1", "--image", "pytorch-2.5-cu124", "--name", "train")


@pytest.fixture
def logged_in(console, gpuctl):
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    return console


def _stopped(gpuctl) -> None:
    assert gpuctl("--json", *LAUNCH).code == 0
    assert gpuctl("--json", "stop", "train").code == 0
    assert gpuctl("--json", "show", "train").json()["status"] == "stopped"


def test_start_no_gpu_runs_it_without_cards_then_a_plain_start_takes_them(logged_in, gpuctl):
    _stopped(gpuctl)
    started = gpuctl("start", "--no-gpu", "train")
    assert started.code == 0, started.stdout + started.stderr
    assert "without GPU" in started.stdout
    shown = gpuctl("--json", "show", "train").json()
    assert (shown["status"], shown["no_gpu"], shown["gpu_count"]) == ("running", True, 1)
    assert shown["billed_hourly_fen"] == 10

    assert gpuctl("--json", "stop", "train").code == 0
    again = gpuctl("--json", "start", "train")
    assert again.code == 0 and again.json()["no_gpu"] is False
    assert gpuctl("--json", "show", "train").json()["billed_hourly_fen"] == 190


def test_start_no_gpu_of_a_running_instance_fails_with_the_apis_code(logged_in, gpuctl):
    assert gpuctl("--json", *LAUNCH).code == 0
    refused = gpuctl("--json", "start", "--no-gpu", "train")
    assert refused.code != 0 and "invalid_state" in refused.stdout + refused.stderr
