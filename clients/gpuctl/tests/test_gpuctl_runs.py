"""``gpuctl runs``: the W&B runs an instance started, with their links (the provider answers what the
console's hook in the image recorded; here the simulated cloud's answer is set by the test)."""

from __future__ import annotations

import pytest

from instances.services import instances_experiment_runs_refresh
from providers.simulated.backend import SimulatedBackend

pytestmark = pytest.mark.django_db(transaction=True)

LAUNCH = ("launch", "--gpu", "a800-80g", "--region", "cn-north-1", "--image", "pytorch-2.5-cu124", "--name", "train")
URL = "https://wandb.ai/lab/demo/runs/abc123"


def test_runs_lists_the_links_and_says_so_when_there_are_none(console, gpuctl, monkeypatch):
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    assert gpuctl("--json", *LAUNCH).code == 0
    none = gpuctl("runs", "train")
    assert none.code == 0 and "No W&B runs recorded" in none.stdout, none.stdout + none.stderr

    run = {"url": URL, "host": "wandb.ai", "name": "lucky-run", "project": "demo", "entity": "lab", "id": "abc123"}
    monkeypatch.setattr(SimulatedBackend, "reads_experiment_runs", True)
    monkeypatch.setattr(SimulatedBackend, "experiment_runs", lambda self, *, key, state: [{**run, "at": None}])
    assert instances_experiment_runs_refresh() == 1  # the worker's periodic pass
    shown = gpuctl("runs", "train")
    assert shown.code == 0 and "lucky-run  lab/demo  " + URL in shown.stdout, shown.stdout
    assert [r["url"] for r in gpuctl("--json", "runs", "train").json()] == [URL]
