"""Idempotency-Key on the POSTs that create or spend: one object per key, the first answer replayed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from billing.models import TopUpOrder
from core.testing import race
from idempotency.models import IdempotencyKey
from idempotency.tasks import idempotency_keys_prune_task
from instances.models import Instance

URL = "/api/v1/instances/"
BODY = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124"}


def _launch(client, body=BODY, key="launch-1"):
    return client.post(URL, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)


def test_the_same_key_and_body_returns_the_first_instance_and_launches_once(rich_alice, alice_client):
    first = _launch(alice_client)
    again = _launch(alice_client)
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Instance.objects.filter(owner=rich_alice).count() == 1


def test_the_same_key_with_another_body_is_a_409(rich_alice, alice_client):
    _launch(alice_client)
    other = _launch(alice_client, body={**BODY, "gpu_count": 2})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert Instance.objects.filter(owner=rich_alice).count() == 1


def test_without_a_key_each_post_launches(rich_alice, alice_client):
    alice_client.post(URL, BODY, content_type="application/json")
    alice_client.post(URL, BODY, content_type="application/json")
    assert Instance.objects.filter(owner=rich_alice).count() == 2


def test_a_refused_request_leaves_the_key_free_for_the_corrected_retry(rich_alice, alice_client):
    assert _launch(alice_client, body={**BODY, "gpu_count": 3}).status_code == 400
    assert _launch(alice_client).status_code == 201
    assert Instance.objects.filter(owner=rich_alice).count() == 1


def test_keys_are_per_user(rich_alice, alice_client, charlie, client_for):
    from instances.tests.conftest import fund

    fund(charlie, 1_000_000)
    a, c = _launch(alice_client), _launch(client_for(charlie))
    assert a.status_code == c.status_code == 201 and a.json()["id"] != c.json()["id"]


def test_a_malformed_key_is_a_400_naming_the_header(rich_alice, alice_client):
    response = _launch(alice_client, key="has space")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["Idempotency-Key"]


def test_a_key_older_than_a_day_is_forgotten_and_pruned(rich_alice, alice_client):
    first = _launch(alice_client)
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    second = _launch(alice_client)
    assert second.json()["id"] != first.json()["id"]
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency_keys_prune_task() == 1
    assert idempotency_keys_prune_task() == 0
    assert not IdempotencyKey.objects.exists()


def test_volumes_top_ups_and_attachments_are_idempotent_too(rich_alice, alice_client):
    def post(url, body, key):
        return alice_client.post(url, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)

    volume = [post("/api/v1/volumes/", {"name": "data", "region": "cn-north-1", "size_gb": 50}, "v") for _ in range(2)]
    assert volume[0].status_code == 201 and volume[0].json()["id"] == volume[1].json()["id"]
    order = [post("/api/v1/billing/orders/", {"amount_fen": 5000}, "o") for _ in range(2)]
    assert order[0].status_code == 201 and order[0].json()["id"] == order[1].json()["id"]
    assert TopUpOrder.objects.filter(user=rich_alice).count() == 1
    instance = _launch(alice_client).json()["id"]
    url = f"/api/v1/volumes/{volume[0].json()['id']}/attachments/"
    attach = [post(url, {"instance": instance, "mount_path": "/data"}, "a") for _ in range(2)]
    assert attach[0].status_code in (201, 409)
    assert attach[0].json() == attach[1].json()


@pytest.mark.django_db(transaction=True)
def test_ten_parallel_identical_launches_create_one_instance_and_all_get_its_id(alice):
    from instances.catalogue import catalogue_seed
    from instances.tests.conftest import fund

    catalogue_seed()
    fund(alice, 1_000_000)
    key = str(uuid.uuid4())

    def one(_k: int) -> tuple:
        client = Client()
        client.force_login(alice)
        response = _launch(client, key=key)
        return response.status_code, response.json().get("id", response.json())

    answers, _refused, errors = race(one, threads=10, timeout=60)
    assert errors == []
    assert len(answers) == 10
    assert {status for status, _ in answers} == {201}, answers
    assert len({instance_id for _, instance_id in answers}) == 1
    assert Instance.objects.filter(owner=alice).count() == 1


def test_a_replayed_deployment_does_not_keep_or_repeat_its_api_key(alice, alice_client):
    from apps_marketplace.loaders import marketplace_catalogue_load
    from instances.catalogue import catalogue_seed
    from instances.tests.conftest import fund

    catalogue_seed()
    marketplace_catalogue_load()
    fund(alice, 1_000_000)
    body = {"app": "llama-3-instruct-chat", "region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1}
    first, again = (
        alice_client.post("/api/v1/deployments/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="d")
        for _ in range(2)
    )
    assert first.status_code == again.status_code == 201 and first.json()["id"] == again.json()["id"]
    assert first.json()["api_key"] and again.json()["api_key"] is None
    assert first.json()["api_key"] not in str(IdempotencyKey.objects.get().response_body)
