"""Deploy: the fit check, then an instance through instances.services, billed from when it runs."""

from apps_marketplace.models import Deployment
from apps_marketplace.selectors import deployment_status
from apps_marketplace.services import api_key_hash
from apps_marketplace.tests.conftest import deploy
from billing.models import Meter


def test_a_deployment_runs_on_its_own_instance_and_is_ready_when_it_runs(rich_alice):
    deployment, key = deploy(rich_alice, precision="bf16", context_length=4096)
    instance = deployment.instance
    assert instance.status == "running" and instance.owner == rich_alice
    assert (instance.gpu_model.slug, instance.gpu_count, instance.image.slug) == (
        "a800-80g",
        1,
        "cuda-12.4-ubuntu22.04",
    )
    assert deployment.parameters == {
        "model_path": "meta-llama/Meta-Llama-3-8B-Instruct",
        "precision": "bf16",
        "context_length": 4096,
    }
    status = deployment_status(deployment=deployment)
    assert status.code == "ready" and [step["state"] for step in status.steps] == ["done"] * 4
    assert Meter.objects.filter(ref=f"instance:{instance.pk}:gpu", stopped_at__isnull=True).count() == 1
    assert key.startswith("dk-") and Deployment.objects.get().api_key_hash == api_key_hash(key)
