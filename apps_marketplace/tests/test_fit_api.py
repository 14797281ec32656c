"""GET /api/v1/apps/<slug>/fit/: the same fit check as the page, as JSON; bad input is a 400."""

URL = "/api/v1/apps/llama-3-instruct-chat/fit/"


def test_it_answers_the_fit_table_with_prices_in_fen(alice_client, catalogue):
    body = alice_client.get(
        URL, {"model": "meta-llama/Meta-Llama-3-70B-Instruct", "precision": "int4", "context_length": 4096}
    ).json()
    assert body["model"] == "meta-llama/Meta-Llama-3-70B-Instruct" and body["precision"] == "int4"
    rows = {(row["gpu"], row["cards"]): row for row in body["rows"]}
    assert rows[("l40s", 1)]["fits"] and not rows[("a100-40g", 1)]["fits"]
    assert rows[("h200", 8)]["price_per_hour_fen"] == 8 * 1490
    assert sum(row["cheapest"] for row in body["rows"]) == 1
    assert body["estimate"]["weights_bytes"] == 39_712_500_000
    assert body["assumptions"]["gpu_memory_utilization_percent"] == 90


def test_defaults_come_from_the_app(alice_client, catalogue):
    body = alice_client.get(URL).json()
    assert (body["model"], body["precision"], body["context_length"], body["concurrency"]) == (
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "bf16",
        8192,
        1,
    )


def test_bad_input_is_a_400_naming_the_fields(alice_client, catalogue):
    response = alice_client.get(URL, {"precision": "fp3", "context_length": "-5", "concurrency": "100000"})
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert set(fields) == {"precision", "context_length", "concurrency"}


def test_a_context_beyond_the_model_is_a_400(alice_client, catalogue):
    response = alice_client.get(URL, {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "context_length": 100000})
    assert response.status_code == 400
    assert "context_length" in response.json()["error"]["fields"]


def test_a_tool_reports_that_it_needs_no_gpu(alice_client, catalogue):
    body = alice_client.get("/api/v1/apps/mlflow/fit/").json()
    assert body["gpu_required"] is False and body["rows"] == []


def test_an_unknown_app_is_a_json_404(alice_client, catalogue):
    response = alice_client.get("/api/v1/apps/nope/fit/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
