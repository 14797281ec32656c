"""Stop, start, restart, redeploy and delete act on the deployment's instance, and so on its meters."""

import pytest

from apps_marketplace.models import Deployment
from apps_marketplace.selectors import deployment_status
from apps_marketplace.services import (
    DeploymentInvalid,
    deployment_delete,
    deployment_redeploy,
    deployment_restart,
    deployment_start,
    deployment_stop,
)
from apps_marketplace.tests.conftest import deploy
from billing.models import Meter
from instances.models import Instance
from instances.tests.conftest import committed, statuses


def _open_meters(instance) -> set[str]:
    return set(
        Meter.objects.filter(ref__startswith=f"instance:{instance.pk}:", stopped_at__isnull=True).values_list(
            "ref", flat=True
        )
    )


def _act(verb, deployment, **kwargs):
    with committed():
        verb(deployment=deployment, **kwargs)
    deployment.instance.refresh_from_db()
    return deployment


def test_stopping_frees_the_gpus_and_bills_only_the_disk(rich_alice):
    deployment, _key = deploy(rich_alice)
    _act(deployment_stop, deployment)
    assert deployment.instance.status == "stopped"
    assert deployment_status(deployment=deployment).code == "stopped"
    assert _open_meters(deployment.instance) == {f"instance:{deployment.instance.pk}:disk"}


def test_starting_again_is_ready_and_bills_the_gpus(rich_alice):
    deployment, _key = deploy(rich_alice)
    _act(deployment_stop, deployment)
    _act(deployment_start, deployment)
    assert deployment_status(deployment=deployment).code == "ready"
    assert _open_meters(deployment.instance) == {f"instance:{deployment.instance.pk}:gpu"}


def test_restart_goes_through_restarting_on_the_same_instance(rich_alice):
    deployment, _key = deploy(rich_alice)
    _act(deployment_restart, deployment)
    assert ("running", "restarting") in statuses(deployment.instance)
    assert deployment.instance.status == "running"


def test_redeploy_changes_the_parameters_and_restarts_in_place(rich_alice):
    deployment, _key = deploy(rich_alice, context_length=4096)
    instance_id = deployment.instance_id
    _act(
        deployment_redeploy,
        deployment,
        model=deployment.model,
        parameters={"context_length": 2048, "precision": "fp8"},
    )
    deployment.refresh_from_db()
    assert deployment.parameters["context_length"] == 2048 and deployment.parameters["precision"] == "fp8"
    assert deployment.instance_id == instance_id and ("running", "restarting") in statuses(deployment.instance)


def test_redeploy_that_no_longer_fits_is_refused_and_changes_nothing(rich_alice):
    from apps_marketplace.models import ModelEntry

    deployment, _key = deploy(rich_alice)
    seventy = ModelEntry.objects.get(repo_id="meta-llama/Meta-Llama-3-70B-Instruct")
    with pytest.raises(DeploymentInvalid):
        deployment_redeploy(deployment=deployment, model=seventy, parameters={"precision": "bf16"})
    deployment.refresh_from_db()
    assert deployment.model.repo_id == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert ("running", "restarting") not in statuses(deployment.instance)


def test_delete_releases_the_instance_and_closes_every_meter(rich_alice):
    deployment, _key = deploy(rich_alice)
    instance = deployment.instance
    with committed():
        deployment_delete(deployment=deployment)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.RELEASED
    assert not _open_meters(instance) and not Deployment.objects.exists()
