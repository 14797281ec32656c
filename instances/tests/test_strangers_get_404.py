"""charlie gets a 404 on every page and endpoint of alice's instance, and changes nothing."""

import pytest
from django.urls import reverse

from instances.models import Instance
from instances.tests.conftest import running

PAGES = [
    ("get", "instance_detail", []),
    ("get", "instance_detail", ["?partial=row"]),
    ("get", "instance_detail", ["?partial=body"]),
    ("post", "instance_rename", []),
    ("post", "instance_auto_stop", []),
]
ACTIONS = ["start", "stop", "restart", "release", "keep-running", "wait-in-line", "leave-line"]
API = [
    ("get", "api-instance-detail"),
    ("get", "api-instance-events"),
    ("post", "api-instance-start"),
    ("post", "api-instance-stop"),
    ("post", "api-instance-restart"),
    ("post", "api-instance-release"),
    ("post", "api-instance-rename"),
    ("post", "api-instance-auto-stop"),
    ("post", "api-instance-keep-running"),
    ("post", "api-instance-leave-queue"),
]


@pytest.fixture
def alices(rich_alice):
    return running(rich_alice)


@pytest.mark.parametrize(("method", "name", "suffix"), PAGES)
def test_charlie_gets_404_on_alices_pages(alices, charlie_client, method, name, suffix):
    url = reverse(name, args=[alices.pk]) + "".join(suffix)
    response = getattr(charlie_client, method)(url, {"name": "mine"} if method == "post" else None)
    assert response.status_code == 404


@pytest.mark.parametrize("action", ACTIONS)
def test_charlie_gets_404_on_alices_actions(alices, charlie_client, action):
    response = charlie_client.post(reverse("instance_action", args=[alices.pk, action]))
    assert response.status_code == 404
    alices.refresh_from_db()
    assert alices.status == Instance.Status.RUNNING


@pytest.mark.parametrize(("method", "name"), API)
def test_charlie_gets_404_on_alices_endpoints(alices, charlie_client, method, name):
    response = getattr(charlie_client, method)(
        reverse(name, args=[alices.pk]), {"name": "mine"}, content_type="application/json"
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    alices.refresh_from_db()
    assert alices.status == Instance.Status.RUNNING
    assert alices.name != "mine"


def test_charlies_list_does_not_show_alices(alices, charlie_client):
    assert alices.name not in charlie_client.get(reverse("instances")).content.decode()
    assert charlie_client.get(reverse("api-instance-list")).json()["count"] == 0
