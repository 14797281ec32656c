"""The API of waiting in line: ``POST …/start/ {"wait": true}`` answers 202 when no cards are free,
``POST …/leave-queue/`` leaves; a stranger gets a 404 with a session or a token."""

import pytest
from django.test import Client
from django.urls import reverse

from accounts.services import api_token_create
from instances.models import Instance
from instances.services import instance_release, instance_stop
from instances.tests.conftest import committed, fund, running

S = Instance.Status


@pytest.fixture
def stopped(rich_alice, bob, settings):
    """Alice's stopped 8 × H800 instance, and bob's on the only H800 node: no cards for her start."""
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    instance = running(rich_alice, gpu="h800", count=8)
    with committed():
        instance_stop(instance=instance)
    fund(bob, 1_000_000)
    instance.bobs = running(bob, gpu="h800", count=8)
    return instance


def _start(client, instance, body=None, **kwargs):
    return client.post(
        reverse("api-instance-start", args=[instance.pk]), body or {}, content_type="application/json", **kwargs
    )


def test_a_start_without_cards_and_without_wait_is_still_a_409(stopped, alice_client):
    response = _start(alice_client, stopped)

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "no_capacity"
    stopped.refresh_from_db()
    assert stopped.start_queued_at is None


def test_wait_answers_202_with_the_instance_in_line(stopped, alice_client):
    response = _start(alice_client, stopped, {"wait": True})

    assert response.status_code == 202, response.content
    data = response.json()
    assert data["status"] == "stopped"
    assert data["queue_position"] == 1
    assert data["start_queued_at"] is not None
    listed = alice_client.get(reverse("api-instance-list")).json()["results"]
    assert {row["id"]: row["queue_position"] for row in listed}[str(stopped.pk)] == 1


def test_wait_starts_at_once_when_cards_are_free(stopped, alice_client):
    with committed():
        instance_release(instance=stopped.bobs)

    response = _start(alice_client, stopped, {"wait": True})

    assert response.status_code == 200
    assert response.json()["status"] == "starting"
    assert response.json()["queue_position"] is None
    assert response.json()["start_queued_at"] is None


def test_leaving_the_line_answers_the_instance_out_of_it(stopped, alice_client):
    _start(alice_client, stopped, {"wait": True})

    response = alice_client.post(reverse("api-instance-leave-queue", args=[stopped.pk]))

    assert response.status_code == 200
    assert (response.json()["start_queued_at"], response.json()["queue_position"]) == (None, None)
    with committed():
        instance_release(instance=stopped.bobs)
    stopped.refresh_from_db()
    assert stopped.status == S.STOPPED


def test_a_refusal_that_is_not_for_cards_is_still_a_409(stopped, alice_client, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 4

    response = _start(alice_client, stopped, {"wait": True})

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "quota_exceeded"


def test_wait_must_be_a_boolean(stopped, alice_client):
    response = _start(alice_client, stopped, {"wait": "soon"})

    assert response.status_code == 400
    assert "wait" in response.json()["error"]["fields"]


@pytest.mark.parametrize("name", ["api-instance-start", "api-instance-leave-queue"])
def test_a_stranger_gets_404_by_session_and_by_token(stopped, charlie, charlie_client, name):
    _token, secret = api_token_create(user=charlie, name="t", expires_at=None)
    url = reverse(name, args=[stopped.pk])

    by_session = charlie_client.post(url, {"wait": True}, content_type="application/json")
    by_token = Client().post(
        url, {"wait": True}, content_type="application/json", headers={"Authorization": f"Bearer {secret}"}
    )

    assert (by_session.status_code, by_token.status_code) == (404, 404)
    stopped.refresh_from_db()
    assert stopped.start_queued_at is None
