"""A tool that serves no model (TensorBoard) deploys without one: no fit check, the cheapest card, its path."""

from apps_marketplace.models import Deployment
from instances.tests.conftest import committed


def test_tensorboard_deploys_with_its_log_directory(rich_alice, client_for):
    client = client_for(rich_alice)
    page = client.get("/apps/tensorboard/")
    assert page.status_code == 200 and not page.context["deploy_form"].fields["model"].required
    with committed():
        response = client.post(
            "/apps/tensorboard/deploy/",
            {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "precision": ""},
        )
    assert response.status_code == 302, response.context["deploy_form"].errors
    deployment = Deployment.objects.get()
    assert deployment.model is None and deployment.parameters == {"logdir": "/mnt/data/runs"}
    assert client.get(response["Location"]).context["status"].code == "ready"


def test_a_bad_log_directory_is_a_form_error_on_that_field(rich_alice, client_for):
    response = client_for(rich_alice).post(
        "/apps/tensorboard/deploy/",
        {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "param_logdir": "../etc; rm -rf /"},
    )
    assert response.status_code == 400
    assert "absolute path" in str(response.context["deploy_form"].errors["param_logdir"])
    assert not Deployment.objects.exists()


def test_the_log_directory_is_the_users_choice(rich_alice, client_for):
    with committed():
        client_for(rich_alice).post(
            "/apps/tensorboard/deploy/",
            {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "param_logdir": "/mnt/vol/exp1"},
        )
    assert Deployment.objects.get().parameters == {"logdir": "/mnt/vol/exp1"}
