"""A read-only API token reads (GET, HEAD, OPTIONS) and is refused everything else with a 403 JSON body."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import APIToken
from accounts.services import api_token_create
from billing.models import TopUpOrder
from instances.models import Instance

LAUNCH = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124"}


@pytest.fixture
def read_token(alice) -> str:
    _token, raw = api_token_create(user=alice, name="dashboard", expires_at=None, scope=APIToken.Scope.READ)
    return raw


@pytest.fixture
def full_token(alice) -> str:
    _token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    return raw


def call(method: str, path: str, raw: str, body: dict | None = None):
    return getattr(Client(), method)(
        path, body or {}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )


def assert_read_only_refusal(response) -> None:
    assert response.status_code == 403, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "read_only_token"
    assert "read-only" in error["message"]


@pytest.mark.parametrize(
    "path", ["/api/v1/instances/", "/api/v1/billing/balance/", "/api/v1/account/profile/", "/api/v1/account/tokens/"]
)
def test_a_read_only_token_reads(read_token, path):
    assert call("get", path, read_token).status_code == 200
    assert Client().head(path, HTTP_AUTHORIZATION=f"Bearer {read_token}").status_code == 200
    assert Client().options(path, HTTP_AUTHORIZATION=f"Bearer {read_token}").status_code == 200


def test_a_read_only_token_cannot_launch(read_token):
    assert_read_only_refusal(call("post", "/api/v1/instances/", read_token, LAUNCH))
    assert not Instance.objects.exists()


def test_a_read_only_token_cannot_top_up(read_token):
    assert_read_only_refusal(call("post", "/api/v1/billing/orders/", read_token, {"amount_fen": 10000}))
    assert not TopUpOrder.objects.exists()


def test_a_read_only_token_cannot_change_the_profile(alice, read_token):
    assert_read_only_refusal(call("patch", "/api/v1/account/profile/", read_token, {"display_name": "Mallory"}))
    alice.refresh_from_db()
    assert alice.display_name == "Alice"


def test_a_read_only_token_cannot_make_itself_a_full_one_nor_revoke_tokens(alice, read_token, full_token):
    assert_read_only_refusal(call("post", "/api/v1/account/tokens/", read_token, {"name": "escalate"}))
    victim = APIToken.objects.get(name="CI")
    assert_read_only_refusal(call("delete", f"/api/v1/account/tokens/{victim.pk}/", read_token))
    assert APIToken.objects.filter(user=alice).count() == 2
    victim.refresh_from_db()
    assert victim.revoked_at is None


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_every_unsafe_method_is_refused_before_the_view(read_token, method):
    # Even on an instance that does not exist: the refusal comes first, and says why.
    assert_read_only_refusal(call(method, "/api/v1/instances/00000000-0000-0000-0000-000000000000/stop/", read_token))


def test_a_full_token_still_reaches_the_view(full_token):
    response = call("post", "/api/v1/instances/", full_token, {})
    assert response.status_code == 400  # the launch's own validation: the token was not what refused it


def test_a_token_is_no_log_in_for_the_pages(read_token, full_token):
    # Pages (token creation, device log-in's confirmation) take only the session: a Bearer header is ignored.
    for raw in (read_token, full_token):
        response = Client().post(
            "/account/api-tokens/", {"name": "escalate", "expires": "never"}, HTTP_AUTHORIZATION=f"Bearer {raw}"
        )
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
        response = Client().post("/account/device/", {"code": "ABCD-EFGH"}, HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert not APIToken.objects.filter(name="escalate").exists()


def test_the_scope_is_chosen_at_creation_and_listed(alice_client):
    response = alice_client.post("/account/api-tokens/", {"name": "grafana", "expires": "30", "scope": "read"})
    assert response.status_code == 201
    assert APIToken.objects.get(name="grafana").scope == "read"
    html = alice_client.get("/account/api-tokens/").content.decode()
    assert "Read-only" in html


def test_the_api_creates_read_only_tokens_and_lists_their_scope(alice_client):
    response = alice_client.post(
        "/api/v1/account/tokens/", {"name": "grafana", "scope": "read"}, content_type="application/json"
    )
    assert response.status_code == 201
    assert response.json()["scope"] == "read"
    listed = alice_client.get("/api/v1/account/tokens/").json()["results"]
    assert [row["scope"] for row in listed] == ["read"]
    made = call("post", "/api/v1/instances/", response.json()["token"], LAUNCH)
    assert_read_only_refusal(made)


def test_without_a_scope_a_token_has_full_access(alice_client):
    response = alice_client.post("/api/v1/account/tokens/", {"name": "CI"}, content_type="application/json")
    assert response.json()["scope"] == "full"


def test_an_unknown_scope_is_a_400_on_that_field(alice_client):
    response = alice_client.post(
        "/api/v1/account/tokens/", {"name": "CI", "scope": "admin"}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "scope" in response.json()["error"]["fields"]
