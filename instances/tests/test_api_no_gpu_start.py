"""``POST /api/v1/instances/{id}/start/`` with ``{"no_gpu": true}``, and the fields that say how it runs."""

from django.urls import reverse

from instances.models import Instance, Node
from instances.services import instance_stop
from instances.tests.conftest import committed, running

S = Instance.Status


def _stopped(user, **kwargs) -> Instance:
    instance = running(user, **kwargs)
    with committed():
        instance_stop(instance=instance)
    return instance


def _start(client, instance, body=None):
    with committed():
        return client.post(
            reverse("api-instance-start", args=[instance.pk]), body or {}, content_type="application/json"
        )


def test_a_no_gpu_start_answers_the_instance_running_without_gpu_at_its_price(rich_alice, alice_client, settings):
    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 10
    instance = _stopped(rich_alice, count=2)
    free = sum(Node.objects.values_list("free_cards", flat=True))
    response = _start(alice_client, instance, {"no_gpu": True})
    assert response.status_code == 200, response.content
    assert response.json()["no_gpu"] is True
    data = alice_client.get(reverse("api-instance-detail", args=[instance.pk])).json()
    assert (data["status"], data["no_gpu"], data["gpu_count"]) == ("running", True, 2)
    assert data["billed_hourly_fen"] == 10
    assert data["hourly_price_fen"] == 380  # the cards' price, for the next normal start
    assert sum(Node.objects.values_list("free_cards", flat=True)) == free
    listed = alice_client.get(reverse("api-instance-list")).json()["results"]
    assert [(r["no_gpu"], r["billed_hourly_fen"]) for r in listed] == [(True, 10)]


def test_a_plain_start_takes_its_cards_and_is_billed_at_their_price(rich_alice, alice_client):
    instance = _stopped(rich_alice, count=2)
    assert alice_client.get(reverse("api-instance-detail", args=[instance.pk])).json()["billed_hourly_fen"] is None
    response = _start(alice_client, instance)
    assert response.status_code == 200
    data = alice_client.get(reverse("api-instance-detail", args=[instance.pk])).json()
    assert (data["status"], data["no_gpu"], data["billed_hourly_fen"]) == ("running", False, 380)


def test_a_cluster_is_a_409_saying_why(rich_alice, alice_client):
    instance = _stopped(rich_alice, count=4, nodes=2)
    response = _start(alice_client, instance, {"no_gpu": True})
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "no_gpu_not_supported"
    assert "cluster" in error["message"]
    instance.refresh_from_db()
    assert instance.status == S.STOPPED


def test_a_running_instance_is_a_409_invalid_state(rich_alice, alice_client):
    instance = running(rich_alice)
    response = _start(alice_client, instance, {"no_gpu": True})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "invalid_state"
    assert "stopped" in response.json()["error"]["message"]


def test_a_body_that_is_not_a_boolean_is_a_400(rich_alice, alice_client):
    instance = _stopped(rich_alice)
    response = _start(alice_client, instance, {"no_gpu": "maybe"})
    assert response.status_code == 400
    assert "no_gpu" in response.json()["error"]["fields"]


def test_charlie_gets_404_on_alices_instance(rich_alice, charlie_client):
    instance = _stopped(rich_alice)
    response = _start(charlie_client, instance, {"no_gpu": True})
    assert response.status_code == 404
    instance.refresh_from_db()
    assert instance.status == S.STOPPED


def test_a_start_without_gpu_never_waits_in_line(rich_alice, alice_client):
    instance = _stopped(rich_alice, count=2)
    response = _start(alice_client, instance, {"no_gpu": True, "wait": True})
    assert response.status_code == 200, response.content
    instance.refresh_from_db()
    assert (instance.no_gpu, instance.start_queued_at) == (True, None)
