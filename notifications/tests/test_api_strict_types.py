"""The settings APIs refuse JSON values of another type than the schema states, with a 400 naming the field.

DRF alone would take ``1`` or ``"yes"`` for a boolean and ``123`` for text.
"""

import pytest

CASES = [
    ("patch", "/api/v1/account/profile/", {"display_name": 123}, "display_name"),
    (
        "put",
        "/api/v1/notifications/preferences/",
        {"preferences": [{"kind": "billing", "email": 1, "webhook": "no"}]},
        "preferences",
    ),
    ("post", "/api/v1/teams/", {"name": 42}, "name"),
    ("post", "/api/v1/account/device/", {"client_name": 7}, "client_name"),
    ("post", "/api/v1/notifications/webhooks/", {"url": "https://example.com/hook", "active": "yes"}, "active"),
    ("post", "/api/v1/notifications/read/", {"all": 1}, "all"),
]


@pytest.mark.parametrize(("method", "url", "body", "field"), CASES)
def test_a_value_of_another_type_is_a_400_naming_the_field(alice_client, method, url, body, field):
    response = getattr(alice_client, method)(url, body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]


def test_the_right_types_are_taken(alice_client):
    response = alice_client.patch(
        "/api/v1/account/profile/", {"display_name": "Alice"}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    response = alice_client.post("/api/v1/notifications/read/", {"all": True}, content_type="application/json")
    assert response.status_code == 200, response.content
