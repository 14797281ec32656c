"""/api/v1/deployments/: list, create, detail, actions and delete, with the console's error format."""

from apps_marketplace.models import Deployment
from instances.models import Instance
from instances.tests.conftest import committed

URL = "/api/v1/deployments/"
BODY = {
    "app": "llama-3-instruct-chat",
    "model": "meta-llama/Meta-Llama-3-8B-Instruct",
    "parameters": {"precision": "bf16", "context_length": 4096},
    "region": "cn-north-1",
    "gpu_model": "a800-80g",
    "gpu_count": 1,
}


def test_create_then_follow_it_to_ready_stop_and_delete(rich_alice, client_for):
    client = client_for(rich_alice)
    with committed():
        created = client.post(URL, BODY, content_type="application/json")
    assert created.status_code == 201
    body = created.json()
    assert body["app"] == "llama-3-instruct-chat" and body["parameters"]["context_length"] == 4096
    assert body["gpu_model"] == "a800-80g" and body["hourly_price_fen"] == 190
    detail = client.get(f"{URL}{body['id']}/").json()
    assert detail["status"] == "ready" and [step["state"] for step in detail["steps"]] == ["done"] * 4
    assert detail["serving"] is False and detail["webui_url"] is None
    assert detail["api_base_url"].endswith(f"/i/{body['instance']}/app/v1")
    assert [row["id"] for row in client.get(URL).json()["results"]] == [body["id"]]
    with committed():
        stopped = client.post(f"{URL}{body['id']}/stop/")
    assert stopped.status_code == 200
    assert client.get(f"{URL}{body['id']}/").json()["status"] == "stopped"
    assert client.post(f"{URL}{body['id']}/restart/").json()["error"]["code"] == "invalid_state"
    with committed():
        assert client.delete(f"{URL}{body['id']}/").status_code == 204
    assert not Deployment.objects.exists()
    assert Instance.objects.get(pk=body["instance"]).status == "released"


def test_bad_input_is_a_400_naming_each_field(rich_alice, client_for):
    client = client_for(rich_alice)
    response = client.post(URL, {**BODY, "app": "nope", "gpu_count": 3, "region": ""}, content_type="application/json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"app", "gpu_count", "region"}
    bad_parameter = client.post(
        URL, {**BODY, "parameters": {"context_length": "lots", "temperature": 1}}, content_type="application/json"
    )
    assert bad_parameter.status_code == 400
    assert set(bad_parameter.json()["error"]["fields"]) == {"parameters.context_length", "parameters.temperature"}
    assert not Deployment.objects.exists() and not Instance.objects.exists()


def test_a_model_the_app_does_not_serve_is_refused(rich_alice, client_for):
    response = client_for(rich_alice).post(
        URL, {**BODY, "model": "stabilityai/stable-diffusion-xl-base-1.0"}, content_type="application/json"
    )
    assert response.status_code == 400 and "model" in response.json()["error"]["fields"]


def test_redeploy_through_the_api(rich_alice, client_for):
    client = client_for(rich_alice)
    with committed():
        body = client.post(URL, BODY, content_type="application/json").json()
    with committed():
        response = client.post(
            f"{URL}{body['id']}/redeploy/", {"parameters": {"context_length": 2048}}, content_type="application/json"
        )
    assert response.status_code == 200 and response.json()["parameters"]["context_length"] == 2048
