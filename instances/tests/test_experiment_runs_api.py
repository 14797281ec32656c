"""The W&B runs an instance started, on its page and at ``GET /api/v1/instances/<id>/runs/``, on the
simulated cloud with its provider answering what the console's hook recorded (the hook and the reading
are tested on real files in ``providers/local/tests/test_wandb_runs.py`` and in a real container in
``test_local_container_secrets_live.py``): the owner sees the links, newest first; a stopped instance
asks its provider nothing; a stranger gets a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from instances.models import Instance
from instances.services import instance_stop
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
    asked = []

    def experiment_runs(self, *, key, state):
        asked.append(key)
        return [dict(RUN)]

    monkeypatch.setattr(SimulatedBackend, "experiment_runs", experiment_runs)
    return asked


def test_the_owner_sees_the_runs_on_the_page_and_in_the_api(rich_alice, alice_client, recorded):
    instance = running(rich_alice)
    answer = alice_client.get(reverse("api-instance-runs", args=[instance.pk]))
    assert answer.status_code == 200
    (run,) = answer.json()
    assert (run["url"], run["name"], run["project"], run["entity"]) == (RUN["url"], "lucky-run", "demo", "lab")
    assert run["at"].startswith("2026-")
    page = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert 'href="https://wandb.ai/lab/demo/runs/abc123"' in page and 'rel="noopener noreferrer nofollow"' in page
    assert "lab/demo" in page


def test_a_stopped_instance_has_none_and_its_provider_is_not_asked(rich_alice, alice_client, recorded):
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.STOPPED
    recorded.clear()
    assert alice_client.get(reverse("api-instance-runs", args=[instance.pk])).json() == []
    assert (
        'id="experiment-runs"' not in alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    )
    assert recorded == []


def test_a_stranger_gets_a_404(rich_alice, charlie_client, recorded):
    instance = running(rich_alice)
    assert charlie_client.get(reverse("api-instance-runs", args=[instance.pk])).status_code == 404
    assert recorded == []
