"""The per-deployment API key: shown once, stored as SHA-256, regenerated, and scoped to its deployment."""

import hashlib

import pytest

from apps_marketplace.models import Deployment
from apps_marketplace.services import DeploymentKeyRefused, deployment_key_check, deployment_key_regenerate
from apps_marketplace.tests.conftest import deploy


def test_only_the_hash_is_stored(rich_alice):
    deployment, key = deploy(rich_alice)
    row = Deployment.objects.values().get(pk=deployment.pk)
    assert key not in str(row)
    assert row["api_key_hash"] == hashlib.sha256(key.encode()).hexdigest() and row["api_key_prefix"] == key[:8]


def test_its_own_key_passes_and_another_deployments_key_is_refused(rich_alice):
    first, first_key = deploy(rich_alice)
    second, second_key = deploy(rich_alice)
    deployment_key_check(deployment=first, key=first_key)
    with pytest.raises(DeploymentKeyRefused):
        deployment_key_check(deployment=first, key=second_key)
    with pytest.raises(DeploymentKeyRefused):
        deployment_key_check(deployment=second, key="")


def test_regenerating_retires_the_old_key(rich_alice):
    deployment, old = deploy(rich_alice)
    new = deployment_key_regenerate(deployment=deployment)
    assert new != old
    deployment_key_check(deployment=deployment, key=new)
    with pytest.raises(DeploymentKeyRefused):
        deployment_key_check(deployment=deployment, key=old)


def test_the_page_shows_the_key_once_after_deploying(rich_alice, client_for):
    client = client_for(rich_alice)
    response = client.post(
        "/apps/llama-3-instruct-chat/deploy/",
        {
            "model": "meta-llama/Meta-Llama-3-8B-Instruct",
            "precision": "bf16",
            "context_length": 8192,
            "region": "cn-north-1",
            "gpu_model": "a800-80g",
            "gpu_count": 1,
        },
    )
    deployment = Deployment.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/apps/deployments/{deployment.pk}/"
    first = client.get(response["Location"])
    key = first.context["api_key"]
    assert key and deployment.api_key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key.encode() in first.content
    second = client.get(response["Location"])
    assert second.context["api_key"] is None and key.encode() not in second.content


def test_the_api_returns_the_key_on_create_and_regenerate_only(rich_alice, client_for):
    client = client_for(rich_alice)
    created = client.post(
        "/api/v1/deployments/",
        {"app": "llama-3-instruct-chat", "region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1},
        content_type="application/json",
    ).json()
    assert created["api_key"].startswith(created["api_key_prefix"])
    detail = client.get(f"/api/v1/deployments/{created['id']}/").json()
    assert "api_key" not in detail
    new = client.post(f"/api/v1/deployments/{created['id']}/regenerate-key/").json()["api_key"]
    assert new != created["api_key"]
    deployment_key_check(deployment=Deployment.objects.get(), key=new)


def test_readiness_answers_its_own_key_and_refuses_another_deployments(rich_alice, client):
    first, first_key = deploy(rich_alice)
    _second, second_key = deploy(rich_alice)
    url = f"/api/v1/deployments/{first.pk}/readiness/"
    ok = client.get(url, headers={"Authorization": f"Bearer {first_key}"})
    assert ok.status_code == 200 and ok.json() == {"id": str(first.pk), "status": "ready", "ready": True}
    for headers in ({"Authorization": f"Bearer {second_key}"}, {"Authorization": "Bearer "}, {}):
        refused = client.get(url, headers=headers)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"


def test_readiness_answers_the_owner_and_not_charlie(rich_alice, client_for, charlie_client):
    deployment, _key = deploy(rich_alice)
    url = f"/api/v1/deployments/{deployment.pk}/readiness/"
    assert client_for(rich_alice).get(url).json()["ready"] is True
    assert charlie_client.get(url).status_code == 404
