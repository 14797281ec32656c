"""The deployment pages: My deployments, and the buttons on a deployment's page."""

from apps_marketplace.models import Deployment
from apps_marketplace.tests.conftest import deploy
from instances.tests.conftest import committed


def test_my_deployments_lists_mine_with_their_status(rich_alice, client_for):
    deployment, _key = deploy(rich_alice)
    response = client_for(rich_alice).get("/apps/deployments/")
    assert response.status_code == 200
    assert [(d.pk, s.code) for d, s in response.context["deployments"]] == [(deployment.pk, "ready")]
    assert f"/apps/deployments/{deployment.pk}/".encode() in response.content


def test_stop_from_the_page_then_the_page_says_stopped(rich_alice, client_for):
    deployment, _key = deploy(rich_alice)
    client = client_for(rich_alice)
    with committed():
        response = client.post(f"/apps/deployments/{deployment.pk}/stop/")
    assert response.status_code == 302
    assert client.get(response["Location"]).context["status"].code == "stopped"


def test_a_refused_action_is_a_message_not_a_500(rich_alice, client_for):
    deployment, _key = deploy(rich_alice)
    client = client_for(rich_alice)
    with committed():
        client.post(f"/apps/deployments/{deployment.pk}/stop/")
    response = client.post(f"/apps/deployments/{deployment.pk}/restart/", follow=True)
    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == ["An instance that is Stopped cannot be restarted."]


def test_redeploy_from_the_page(rich_alice, client_for):
    deployment, _key = deploy(rich_alice)
    with committed():
        response = client_for(rich_alice).post(
            f"/apps/deployments/{deployment.pk}/redeploy/",
            {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "precision": "fp8", "context_length": 2048},
        )
    assert response.status_code == 302
    deployment.refresh_from_db()
    assert deployment.parameters["precision"] == "fp8" and deployment.parameters["context_length"] == 2048


def test_delete_from_the_page(rich_alice, client_for):
    deployment, _key = deploy(rich_alice)
    with committed():
        response = client_for(rich_alice).post(f"/apps/deployments/{deployment.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/apps/deployments/"
    assert not Deployment.objects.exists()
