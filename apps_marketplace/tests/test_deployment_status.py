"""A deployment's status is derived from its instance: scheduling, pulling, loading, ready, or stopped/failed."""

from datetime import timedelta

from django.utils import timezone

from apps_marketplace.selectors import deployment_status
from apps_marketplace.tests.conftest import deploy
from instances.models import Instance


def _with_instance(deployment, **fields):
    Instance.objects.filter(pk=deployment.instance_id).update(**fields)
    deployment.instance.refresh_from_db()
    return deployment


def test_the_steps_follow_the_instance_and_the_estimated_pull_time(rich_alice):
    deployment, _key = deploy(rich_alice)
    now = timezone.now()
    _with_instance(deployment, status="scheduling", status_changed_at=now)
    assert deployment_status(deployment=deployment, now=now).code == "scheduling"
    _with_instance(deployment, status="provisioning", status_changed_at=now)
    status = deployment_status(deployment=deployment, now=now)
    assert status.code == "pulling"
    assert [step["state"] for step in status.steps] == ["done", "current", "todo", "todo"]
    pull_s = (deployment.app.image_size_bytes + deployment.app.webui_image_size_bytes) // 200_000_000
    assert pull_s > 0
    later = now + timedelta(seconds=pull_s + 1)
    assert deployment_status(deployment=deployment, now=later).code == "loading"


def test_failed_and_stopped_instances_are_not_ready(rich_alice):
    deployment, _key = deploy(rich_alice)
    _with_instance(deployment, status="failed", status_reason="Launch failed: the node is gone")
    assert (deployment_status(deployment=deployment).code, deployment_status(deployment=deployment).badge) == (
        "failed",
        "red",
    )
    _with_instance(deployment, status="stopped")
    assert not deployment_status(deployment=deployment).is_ready


def test_the_page_shows_the_steps_and_no_dead_webui_link(rich_alice, client_for):
    deployment, _key = deploy(rich_alice)
    response = client_for(rich_alice).get(f"/apps/deployments/{deployment.pk}/")
    html = response.content.decode()
    assert response.status_code == 200 and "Open WebUI</a>" not in html
    assert "appears on backends that run the app" in html and "/chat/completions" in html
    assert f'data-live-instance="{deployment.instance_id}"' in html
    partial = client_for(rich_alice).get(f"/apps/deployments/{deployment.pk}/?partial=status")
    assert partial.content.decode().startswith('<div id="deployment-status"')
