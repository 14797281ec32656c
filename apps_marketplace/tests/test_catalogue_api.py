"""GET /api/v1/models/, /api/v1/datasets/ and /api/v1/apps/: filters, pagination, errors, query budgets."""

from django.db import connection
from django.test.utils import CaptureQueriesContext


def test_models_filter_like_the_page(alice_client, catalogue):
    body = alice_client.get("/api/v1/models/", {"organisation": "Qwen", "task": "code-generation"}).json()
    repos = {item["repo_id"] for item in body["results"]}
    assert "Qwen/Qwen2.5-Coder-32B-Instruct" in repos
    assert all(repo.startswith("Qwen/Qwen2.5-Coder") for repo in repos)
    first = body["results"][0]
    assert first["mount_path"] == f"/models/{first['repo_id']}"
    assert first["source_url"].startswith("https://huggingface.co/")


def test_models_search_and_size(alice_client, catalogue):
    body = alice_client.get("/api/v1/models/", {"q": "llama", "size": "gt1000"}).json()
    assert {item["repo_id"] for item in body["results"]} == set()
    body = alice_client.get("/api/v1/models/", {"q": "Llama-3.1-405B", "size": "100-1000"}).json()
    assert {item["repo_id"] for item in body["results"]} == {
        "meta-llama/Llama-3.1-405B-Instruct",
        "meta-llama/Llama-3.1-405B-Instruct-FP8",
    }


def test_lists_are_paginated(alice_client, catalogue):
    body = alice_client.get("/api/v1/models/", {"page_size": 10, "page": 2}).json()
    assert body["count"] == catalogue.models
    assert len(body["results"]) == 10
    assert body["next"] and body["previous"]


def test_datasets_filter_by_licence(alice_client, catalogue):
    body = alice_client.get("/api/v1/datasets/", {"licence": "odc-by", "page_size": 100}).json()
    assert body["count"] >= 5
    assert {item["licence"] for item in body["results"]} == {"odc-by"}


def test_a_bad_filter_answers_400_in_the_console_format(alice_client, catalogue):
    response = alice_client.get("/api/v1/models/", {"task": "teleportation"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert "task" in error["fields"]


def test_an_unknown_model_id_is_a_json_404(alice_client, catalogue):
    response = alice_client.get("/api/v1/models/999999999/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_apps_list_their_models_parameters_and_ports(alice_client, catalogue):
    body = alice_client.get("/api/v1/apps/", {"category": "chat"}).json()
    llama = next(item for item in body["results"] if item["slug"] == "llama-3-instruct-chat")
    assert llama["openai_compatible"] is True
    assert llama["port"] == 8000 and llama["webui_port"] == 8080
    assert llama["default_model"] == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert "meta-llama/Meta-Llama-3-70B-Instruct" in llama["models"]
    assert {p["key"] for p in llama["parameters"]} == {"model_path", "precision", "context_length"}
    assert llama["command_template"].startswith("vllm serve {model_path}")


def _queries(client, path, params) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path, params).status_code == 200
    return len(captured)


def test_list_query_counts_do_not_grow_with_page_size(alice_client, catalogue):
    for path in ("/api/v1/models/", "/api/v1/datasets/", "/api/v1/apps/"):
        small = _queries(alice_client, path, {"page_size": 2})
        large = _queries(alice_client, path, {"page_size": 100})
        assert small == large <= 6, path
