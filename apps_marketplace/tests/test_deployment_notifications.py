"""A deployment's owner hears when its app is ready, and when it failed (instances.hooks.transition)."""

from __future__ import annotations

from apps_marketplace.tests.conftest import deploy
from apps_marketplace.tests.test_deployment_task_errors import _deploy_while
from instances.models import Instance
from notifications.models import Kind, Notification


def test_the_owner_is_told_the_deployment_is_ready(rich_alice):
    deployment, _key = deploy(rich_alice)
    assert deployment.instance.status == Instance.Status.RUNNING
    row = Notification.objects.get(user=rich_alice, kind=Kind.DEPLOYMENT_READY)
    assert "is ready" in row.title and row.link == f"/apps/deployments/{deployment.pk}/"


def test_the_owner_is_told_the_deployment_failed(rich_alice):
    deployment = _deploy_while(rich_alice, BUG_IN=["create"])
    assert deployment.instance.status == Instance.Status.FAILED
    assert Notification.objects.filter(user=rich_alice, kind=Kind.DEPLOYMENT_FAILED).count() == 1
    assert not Notification.objects.filter(kind=Kind.DEPLOYMENT_READY).exists()


def test_an_instance_that_is_no_deployment_tells_nothing_of_the_kind(rich_alice):
    from instances.tests.conftest import running

    running(rich_alice)
    assert not Notification.objects.filter(kind__in=[Kind.DEPLOYMENT_READY, Kind.DEPLOYMENT_FAILED]).exists()
