from django.urls import reverse

from accounts.models import SSHKey
from instances.models import Instance
from instances.tests.conftest import running

BODY = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 2, "image": "pytorch-2.5-cu124", "disk_gb": 100}


def test_launching_through_the_api_answers_201_with_the_instance(rich_alice, alice_client):
    response = alice_client.post(reverse("api-instance-list"), BODY, content_type="application/json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["gpu_model"] == "a800-80g"
    assert data["gpu_count"] == 2
    assert data["hourly_price_fen"] == 380
    assert Instance.objects.get(pk=data["id"]).owner == rich_alice


def test_a_bad_card_count_is_a_400_on_that_field(rich_alice, alice_client):
    response = alice_client.post(
        reverse("api-instance-list"), {**BODY, "gpu_count": 3}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "gpu_count" in response.json()["error"]["fields"]


def test_no_capacity_is_a_409_with_its_code(rich_alice, alice_client, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    body = {**BODY, "gpu_model": "h800", "gpu_count": 8}
    assert alice_client.post(reverse("api-instance-list"), body, content_type="application/json").status_code == 201
    response = alice_client.post(reverse("api-instance-list"), body, content_type="application/json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "no_capacity"


def test_over_quota_is_a_409_with_its_code(rich_alice, alice_client, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 1
    response = alice_client.post(reverse("api-instance-list"), BODY, content_type="application/json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "quota_exceeded"


def test_no_money_is_a_409_insufficient_funds(alice, alice_client, catalogue):
    response = alice_client.post(reverse("api-instance-list"), BODY, content_type="application/json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "insufficient_funds"


def test_another_users_ssh_key_is_refused(rich_alice, alice_client, charlie):
    key = SSHKey.objects.create(
        user=charlie, name="c", public_key="ssh-ed25519 AAAA", key_type="ssh-ed25519", bits=256, fingerprint="SHA256:x"
    )
    response = alice_client.post(
        reverse("api-instance-list"), {**BODY, "ssh_keys": [key.pk]}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "ssh_keys" in response.json()["error"]["fields"]


def test_actions_through_the_api(rich_alice, alice_client, django_capture_on_commit_callbacks):
    instance = running(rich_alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("api-instance-stop", args=[instance.pk]))
    assert response.status_code == 200
    assert alice_client.get(reverse("api-instance-detail", args=[instance.pk])).json()["status"] == "stopped"
    response = alice_client.post(reverse("api-instance-restart", args=[instance.pk]))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "invalid_state"
    response = alice_client.post(
        reverse("api-instance-rename", args=[instance.pk]), {"name": "api-name"}, content_type="application/json"
    )
    assert response.json()["name"] == "api-name"
    events = alice_client.get(reverse("api-instance-events", args=[instance.pk])).json()["results"]
    assert [e["new"] for e in events][-2:] == ["stopping", "stopped"]


def test_the_catalogue_lists_models_with_free_cards_and_prices(rich_alice, alice_client):
    from instances.services import nodes_sync

    nodes_sync(alias="default")
    data = alice_client.get(reverse("api-catalogue")).json()
    a800 = next(g for g in data["gpu_models"] if g["slug"] == "a800-80g")
    assert a800["price_per_card_hour_fen"] == 190
    assert a800["free_cards"] == 24
    assert a800["free_cards_by_region"]["cn-north-1"] == {"free": 16, "largest_on_one_node": 8, "waiting_in_line": 0}
    assert {i["slug"] for i in data["images"]} >= {"pytorch-2.5-cu124"}


def test_quota_and_quota_requests_through_the_api(rich_alice, alice_client, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    rows = alice_client.get(reverse("api-quota")).json()
    assert next(r for r in rows if r["gpu_model"] == "a800-80g")["limit"] == 8
    response = alice_client.post(
        reverse("api-quota-request-list"),
        {"gpu_model": "a800-80g", "cards": 32, "duration_days": 30, "reason": "pretraining"},
        content_type="application/json",
    )
    assert response.status_code == 201
    assert response.json()["status"] == "pending"
    again = alice_client.post(
        reverse("api-quota-request-list"),
        {"gpu_model": "a800-80g", "cards": 32, "duration_days": 30, "reason": "pretraining"},
        content_type="application/json",
    )
    assert again.status_code == 400
    assert alice_client.get(reverse("api-quota-request-list")).json()["count"] == 1


def test_the_schema_builds(alice_client):
    assert alice_client.get(reverse("api-schema")).status_code == 200
