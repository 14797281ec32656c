"""A deployment whose instance's task raises, or whose launch outlives its deadline, is shown failed
(or stopped) with why, on its page and in the API, and costs nothing it did not run for."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps_marketplace.models import App, Deployment, ModelEntry
from apps_marketplace.selectors import deployment_status
from apps_marketplace.services import deployment_create, deployment_redeploy
from apps_marketplace.tests.conftest import deploy
from billing.models import Meter
from billing.services import balance_get
from instances.models import GpuModel, Instance, Region
from instances.reconciler import instances_reconcile
from instances.tests.conftest import committed, simulate
from providers.simulated.backend import SimulatedBug

MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"


def _deploy_while(user, **options) -> Deployment:
    """Deploy while the simulated cloud misbehaves as ``options`` say; its provision task raises."""
    with simulate(**options), pytest.raises(SimulatedBug), committed():
        deployment_create(
            user=user,
            app=App.objects.get(slug="llama-3-instruct-chat"),
            model=ModelEntry.objects.get(repo_id=MODEL),
            parameters={},
            gpu_model=GpuModel.objects.get(slug="a800-80g"),
            gpu_count=1,
            region=Region.objects.get(slug="cn-north-1"),
        )
    return Deployment.objects.select_related("instance").get()


def test_a_deployment_whose_launch_raises_is_failed_with_the_error_and_costs_nothing(rich_alice, client_for):
    balance = balance_get(user=rich_alice).total

    deployment = _deploy_while(rich_alice, BUG_IN=["create"])

    reason = "Internal error while provisioning: SimulatedBug: simulated bug in create()"
    assert deployment_status(deployment=deployment).code == "failed"
    assert deployment.instance.status_reason_text == reason
    client = client_for(rich_alice)
    page = client.get(f"/apps/deployments/{deployment.pk}/").content.decode()
    api = client.get(f"/api/v1/deployments/{deployment.pk}/").json()
    assert reason in page and "Traceback" not in page
    assert (api["status"], api["status_reason"]) == ("failed", reason)
    assert not Meter.objects.filter(ref__startswith=f"instance:{deployment.instance_id}").exists()
    assert balance_get(user=rich_alice).total == balance


def test_a_redeploy_whose_restart_raises_is_stopped_with_the_error(rich_alice, client_for):
    deployment, _key = deploy(rich_alice)

    with simulate(BUG_IN=["restart"]), pytest.raises(SimulatedBug), committed():
        deployment_redeploy(deployment=deployment, model=deployment.model, parameters={"context_length": 2048})

    deployment.instance.refresh_from_db()
    assert deployment_status(deployment=deployment).code == "stopped"
    page = client_for(rich_alice).get(f"/apps/deployments/{deployment.pk}/").content.decode()
    assert "Internal error while restarting: SimulatedBug" in page
    assert not Meter.objects.filter(ref__endswith=":gpu", stopped_at__isnull=True).exists()


def test_a_deployment_that_never_boots_is_failed_at_its_deadline(rich_alice, settings):
    with simulate(HANG_CREATE=1):
        deployment, _key = deploy(rich_alice)
    assert deployment_status(deployment=deployment).code in ("pulling", "loading")
    Instance.objects.filter(pk=deployment.instance_id).update(
        status_changed_at=timezone.now() - timedelta(seconds=settings.INSTANCES_PROVISION_TIMEOUT_S + 1)
    )

    with committed():
        instances_reconcile()

    deployment.instance.refresh_from_db()
    assert deployment_status(deployment=deployment).code == "failed"
    assert deployment.instance.status_reason_text == "Launch failed: the machine did not boot within 15 minutes"
