"""Deploying goes through instance_launch: too little balance or too little quota is refused, clearly."""

from apps_marketplace.models import Deployment
from apps_marketplace.tests.conftest import deploy
from instances.models import GpuModel, GpuQuota, Instance
from instances.tests.conftest import fund

BODY = {
    "app": "llama-3-instruct-chat",
    "model": "meta-llama/Meta-Llama-3-8B-Instruct",
    "region": "cn-north-1",
    "gpu_model": "a800-80g",
    "gpu_count": 1,
}


def test_without_balance_the_api_answers_409_insufficient_funds(alice, fleet, client_for):
    response = client_for(alice).post("/api/v1/deployments/", BODY, content_type="application/json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "insufficient_funds"
    assert not Deployment.objects.exists() and not Instance.objects.exists()


def test_without_balance_the_page_says_why(alice, fleet, client_for):
    form = {**BODY, "precision": "bf16", "context_length": 8192}
    response = client_for(alice).post("/apps/llama-3-instruct-chat/deploy/", form)
    assert response.status_code == 400
    assert response.context["deploy_form"].non_field_errors()
    assert not Deployment.objects.exists()


def test_over_quota_is_a_409_quota_exceeded(alice, fleet, client_for):
    fund(alice, 1_000_000)
    GpuQuota.objects.create(user=alice, gpu_model=GpuModel.objects.get(slug="a800-80g"), cards=1)
    deploy(alice)
    response = client_for(alice).post("/api/v1/deployments/", BODY, content_type="application/json")
    assert response.status_code == 409
    body = response.json()["error"]
    assert body["code"] == "quota_exceeded" and "quota" in body["message"]
    assert Deployment.objects.count() == 1 and Instance.objects.count() == 1
