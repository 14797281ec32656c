"""A model that does not fit the chosen GPUs is refused before anything is launched or charged."""

import pytest

from apps_marketplace.models import Deployment
from apps_marketplace.services import DeploymentInvalid
from apps_marketplace.tests.conftest import deploy
from billing.models import Meter, Transaction
from instances.models import Instance

SEVENTY_B = "meta-llama/Meta-Llama-3-70B-Instruct"


def _nothing_happened(transactions_before: int) -> None:
    assert not Deployment.objects.exists() and not Instance.objects.exists() and not Meter.objects.exists()
    assert Transaction.objects.count() == transactions_before


def test_70b_at_bf16_on_one_a800_is_refused_with_the_reason(rich_alice):
    before = Transaction.objects.count()
    with pytest.raises(DeploymentInvalid) as refused:
        deploy(rich_alice, model=SEVENTY_B, precision="bf16")
    assert refused.value.field == "gpu_count"
    assert "does not fit on 1 × A800 80GB" in refused.value.message and "GiB per card" in refused.value.message
    _nothing_happened(before)


def test_the_api_answers_400_naming_the_field(rich_alice, client_for):
    before = Transaction.objects.count()
    response = client_for(rich_alice).post(
        "/api/v1/deployments/",
        {
            "app": "llama-3-instruct-chat",
            "model": SEVENTY_B,
            "parameters": {"precision": "bf16"},
            "region": "cn-north-1",
            "gpu_model": "a800-80g",
            "gpu_count": 1,
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "does not fit" in response.json()["error"]["fields"]["gpu_count"][0]
    _nothing_happened(before)


def test_the_page_shows_it_as_a_form_error(rich_alice, client_for):
    before = Transaction.objects.count()
    response = client_for(rich_alice).post(
        "/apps/llama-3-instruct-chat/deploy/",
        {
            "model": SEVENTY_B,
            "precision": "bf16",
            "context_length": 8192,
            "region": "cn-north-1",
            "gpu_model": "a800-80g",
            "gpu_count": 1,
        },
    )
    assert response.status_code == 400
    assert "does not fit on 1 × A800 80GB" in str(response.context["deploy_form"].errors["gpu_count"])
    _nothing_happened(before)


def test_the_same_model_on_two_a800s_fits(rich_alice):
    deployment, _key = deploy(rich_alice, model=SEVENTY_B, precision="bf16", count=2)
    assert deployment.instance.status == "running" and deployment.instance.gpu_count == 2
