"""What needs no console: the SDK's retries (429/503 and Retry-After), idempotency keys, pagination and
errors, against a scripted transport; the CLI's shell completion and the exit codes in its help."""

from __future__ import annotations

import json

import httpx
import pytest
from gpuctl import Client, Conflict, NotFound, RateLimited, Unavailable


def scripted(*answers: httpx.Response):
    """A client whose requests get ``answers`` in turn; returns (client, requests seen, sleeps asked)."""
    seen: list[httpx.Request] = []
    sleeps: list[float] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    client = Client("http://console.test", "tok", transport=httpx.MockTransport(handle), sleep=sleeps.append)
    return client, seen, sleeps


def error(status: int, code: str, headers: dict | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": code, "fields": {}}}, headers=headers)


def test_429_and_503_are_retried_waiting_what_retry_after_says():
    client, seen, sleeps = scripted(
        error(429, "throttled", {"Retry-After": "7"}),
        error(503, "unavailable", {"Retry-After": "2"}),
        httpx.Response(200, json={"total_fen": 5}),
    )
    assert client.billing_balance_get() == {"total_fen": 5}
    assert len(seen) == 3 and sleeps[0] >= 7 and sleeps[1] >= 2


def test_retries_back_off_and_give_up_with_the_apis_code():
    client, seen, sleeps = scripted(*[error(503, "database_unavailable")] * 6)
    client.max_retries = 5
    with pytest.raises(Unavailable) as raised:
        client.instances_get("abc")
    assert raised.value.code == "database_unavailable" and raised.value.status == 503
    assert len(seen) == 6 and len(sleeps) == 5
    assert all(0 <= wait <= client.backoff_s * 2**attempt for attempt, wait in enumerate(sleeps))
    client, seen, _ = scripted(*[error(429, "throttled")] * 6)
    with pytest.raises(RateLimited):
        client.billing_balance_get()


def test_a_retried_create_sends_the_same_idempotency_key_and_each_create_its_own():
    created = httpx.Response(201, json={"id": "v"})
    client, seen, _ = scripted(error(429, "throttled", {"Retry-After": "0"}), created, created, created)
    client.volumes_create({"name": "a", "region": "r", "size_gb": 1})
    first, retried = seen[0].headers["Idempotency-Key"], seen[1].headers["Idempotency-Key"]
    assert first == retried and len(first) == 36
    client.volumes_create({"name": "b", "region": "r", "size_gb": 1})
    client.volumes_create({"name": "c", "region": "r", "size_gb": 1}, idempotency_key="mine")
    assert seen[2].headers["Idempotency-Key"] not in (first, "mine") and seen[3].headers["Idempotency-Key"] == "mine"
    assert json.loads(seen[3].content) == {"name": "c", "region": "r", "size_gb": 1}


def test_lists_are_iterators_fetching_page_after_page():
    client, seen, _ = scripted(
        httpx.Response(200, json={"count": 3, "next": "x", "previous": None, "results": [{"id": 1}, {"id": 2}]}),
        httpx.Response(200, json={"count": 3, "next": None, "previous": "x", "results": [{"id": 3}]}),
    )
    rows = client.instances_list(status=["running", "stopped"], released=True)
    assert seen == []  # nothing asked until iterated
    assert [row["id"] for row in rows] == [1, 2, 3]
    assert seen[0].url.params.get_list("status") == ["running", "stopped"]
    assert seen[0].url.params["released"] == "true" and seen[1].url.params["page"] == "2"


def test_an_answer_documented_as_paginated_that_is_a_plain_list_still_iterates():
    client, _, _ = scripted(httpx.Response(200, json=[{"new": "running"}, {"new": "stopped"}]))
    assert [row["new"] for row in client.instances_events_list("abc")] == ["running", "stopped"]


def test_errors_are_exceptions_by_status_carrying_the_code_and_fields():
    client, seen, _ = scripted(error(404, "not_found"), error(409, "insufficient_funds"))
    with pytest.raises(NotFound):
        client.instances_get("a b/c")
    assert seen[0].url.raw_path == b"/api/v1/instances/a%20b%2Fc/"  # path parameters are quoted
    with pytest.raises(Conflict) as raised:
        client.instances_start("abc")
    assert raised.value.code == "insufficient_funds"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_scripts(gpuctl, shell):
    run = gpuctl("completion", shell)
    assert run.code == 0 and "_GPUCTL_COMPLETE" in run.stdout
    assert gpuctl("--json", "completion", shell).json()["shell"] == shell


def test_help_documents_the_exit_codes(gpuctl):
    text = gpuctl("--help").stdout
    for line in ("0  done", "2  usage", "3  no such object", "5  not logged in", "7  the console could not be reached"):
        assert line in text
