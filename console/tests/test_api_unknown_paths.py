"""A path under /api/ that names no endpoint answers the API's JSON 404, whatever the method, and
whoever asks: a browser session's POST without a CSRF token included (it used to get the CSRF page's
HTML 403, which no API client can parse)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_an_unknown_api_path_is_a_json_404(method, alice, client):
    client.force_login(alice)
    client.handler.enforce_csrf_checks = True

    response = getattr(client, method)("/api/v1/instances/7d9b2b0e-8c1f-4c52-9a59-3f0c9a6f1b7e/ports/-3/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "not_found"
