"""Another user's deployment does not exist for charlie: every page and endpoint is a 404."""

import pytest

from apps_marketplace.models import Deployment
from apps_marketplace.tests.conftest import deploy


@pytest.fixture
def alices(rich_alice):
    deployment, _key = deploy(rich_alice)
    return deployment


@pytest.mark.parametrize("suffix", ["", "?partial=status"])
def test_pages(alices, charlie_client, suffix):
    assert charlie_client.get(f"/apps/deployments/{alices.pk}/{suffix}").status_code == 404


@pytest.mark.parametrize("verb", ["stop", "start", "restart", "redeploy", "regenerate-key", "delete"])
def test_page_actions(alices, charlie_client, verb):
    assert charlie_client.post(f"/apps/deployments/{alices.pk}/{verb}/").status_code == 404
    assert Deployment.objects.filter(pk=alices.pk, instance__status="running").exists()


def test_the_list_does_not_show_it(alices, charlie_client):
    assert charlie_client.get("/apps/deployments/").context["deployments"] == []
    assert charlie_client.get("/api/v1/deployments/").json()["results"] == []


@pytest.mark.parametrize(
    "method,suffix",
    [("get", ""), ("delete", "")]
    + [("post", f"{verb}/") for verb in ["stop", "start", "restart", "redeploy", "regenerate-key"]],
)
def test_endpoints(alices, charlie_client, method, suffix):
    response = getattr(charlie_client, method)(
        f"/api/v1/deployments/{alices.pk}/{suffix}", content_type="application/json"
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    alices.instance.refresh_from_db()
    assert alices.instance.status == "running"
