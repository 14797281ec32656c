"""The W&B runs an instance started, on its page and at ``GET /api/v1/instances/<id>/runs/``, on the
simulated cloud with its provider answering what the console's hook recorded (the hook and the reading
are tested on real files in ``providers/local/tests/test_wandb_runs.py``, in a real container in
``test_local_container_secrets_live.py`` and on Slurm in ``test_slurm_containers.py``): the worker saves
them (only from providers that read them, only running instances, a row written only on a change),
pages and the API read what it saved; a stopped instance keeps its links, a released one shows none;
a stranger gets a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from instances.models import Instance
from instances.services import instance_release, instance_stop, instances_experiment_runs_refresh
from instances.tests.conftest import committed, running
from providers.simulated.backend import SimulatedBackend

pytestmark = pytest.mark.django_db

RUN = {
    "url": "https://wandb.ai/lab/demo/runs/abc123",
    "host": "wandb.ai",
    "name": "lucky-run",
    "project": "demo",
    "entity": "lab",
    "id": "abc123",
    "at": 1796500000,
}


@pytest.fixture
def recorded(monkeypatch):
    """The simulated cloud reads runs, and answers ``answers["runs"]``; ``asked``: the keys it was asked."""
    answers = {"runs": [dict(RUN)], "asked": []}

    def experiment_runs(self, *, key, state):
        answers["asked"].append(key)
        return [dict(r) for r in answers["runs"]]

    monkeypatch.setattr(SimulatedBackend, "reads_experiment_runs", True)
    monkeypatch.setattr(SimulatedBackend, "experiment_runs", experiment_runs)
    return answers


def test_the_worker_saves_them_and_the_owner_sees_them_on_the_page_and_in_the_api(rich_alice, alice_client, recorded):
    instance = running(rich_alice)
    assert alice_client.get(reverse("api-instance-runs", args=[instance.pk])).json() == []  # not read yet
    assert instances_experiment_runs_refresh() == 1
    assert instances_experiment_runs_refresh() == 0  # unchanged: no row written
    answer = alice_client.get(reverse("api-instance-runs", args=[instance.pk]))
    assert answer.status_code == 200
    (run,) = answer.json()
    assert (run["url"], run["name"], run["project"], run["entity"]) == (RUN["url"], "lucky-run", "demo", "lab")
    assert run["at"].startswith("2026-")
    page = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert 'href="https://wandb.ai/lab/demo/runs/abc123"' in page and 'rel="noopener noreferrer nofollow"' in page
    assert "lab/demo" in page


def test_a_stopped_instance_keeps_its_links_and_is_not_asked_and_a_released_one_has_none(
    rich_alice, alice_client, recorded
):
    instance = running(rich_alice)
    instances_experiment_runs_refresh()
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.STOPPED
    recorded["asked"].clear()
    instances_experiment_runs_refresh()
    assert recorded["asked"] == []
    assert [r["url"] for r in alice_client.get(reverse("api-instance-runs", args=[instance.pk])).json()] == [RUN["url"]]
    with committed():
        instance_release(instance=instance)
    assert alice_client.get(reverse("api-instance-runs", args=[instance.pk])).json() == []


def test_providers_that_read_none_are_not_asked(rich_alice, monkeypatch):
    asked = []
    monkeypatch.setattr(SimulatedBackend, "experiment_runs", lambda self, *, key, state: asked.append(key) or [])
    running(rich_alice)
    assert instances_experiment_runs_refresh() == 0 and asked == []


def test_a_stranger_gets_a_404(rich_alice, charlie_client, recorded):
    instance = running(rich_alice)
    instances_experiment_runs_refresh()
    assert charlie_client.get(reverse("api-instance-runs", args=[instance.pk])).status_code == 404
