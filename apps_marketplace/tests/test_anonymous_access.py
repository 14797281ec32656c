"""Strangers without a session: pages redirect to the login, the API answers 401 in JSON."""

import pytest
from django.urls import reverse

PAGES = ["/apps/", "/apps/models/", "/apps/datasets/", "/apps/llama-3-instruct-chat/"]
API = ["/api/v1/apps/", "/api/v1/models/", "/api/v1/datasets/", "/api/v1/apps/llama-3-instruct-chat/fit/"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_send_anonymous_visitors_to_the_login(client, catalogue, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("account_login"))


@pytest.mark.parametrize("path", API)
def test_the_api_refuses_anonymous_callers_in_json(client, catalogue, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_a_bad_token_is_refused(client, catalogue):
    response = client.get("/api/v1/models/", headers={"Authorization": "Bearer gpuc_nope"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"
