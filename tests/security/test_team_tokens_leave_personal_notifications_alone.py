"""A token scoped to a team acts for the team: it cannot add, change, test or remove webhook receivers
of its maker's personal notifications, nor change where they go, so a team's CI cannot have the
maker's personal news (money, security) sent to a receiver of its choosing. A 403 ``team_token``, as
the account's credentials answer such a token; reads stay allowed, as there."""

from __future__ import annotations

from django.test import Client

from accounts.services import api_token_create
from notifications.models import WebhookEndpoint
from notifications.services import webhook_endpoint_create
from teams import services as teams_services

HOOKS = "/api/v1/notifications/webhooks/"
URL = "https://receiver.example.com/hook"


def _call(raw: str, method: str, path: str, data=None):
    return getattr(Client(), method)(path, data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")


def _refused(response) -> bool:
    return response.status_code == 403 and response.json()["error"]["code"] == "team_token"


def test_a_team_token_cannot_add_webhook_receivers_for_its_maker_s_personal_notifications(alice):
    team = teams_services.team_create(user=alice, name="Lab")
    _token, scoped = api_token_create(user=alice, name="lab-ci", expires_at=None, team_id=team.pk)
    assert _refused(_call(scoped, "post", HOOKS, {"url": URL}))
    assert not WebhookEndpoint.objects.exists()
    _token, own = api_token_create(user=alice, name="mine", expires_at=None)
    assert _call(own, "post", HOOKS, {"url": URL}).status_code == 201  # her personal token may


def test_a_team_token_cannot_change_test_or_remove_its_maker_s_webhook_receivers(alice):
    team = teams_services.team_create(user=alice, name="Lab")
    endpoint = webhook_endpoint_create(user=alice, url=URL, active=False)
    _token, scoped = api_token_create(user=alice, name="lab-ci", expires_at=None, team_id=team.pk)
    one = f"{HOOKS}{endpoint.pk}/"
    assert _refused(_call(scoped, "patch", one, {"url": "https://attacker.example.com/", "active": True}))
    assert _refused(_call(scoped, "post", f"{one}test/"))
    assert _refused(_call(scoped, "delete", one))
    preferences = {"preferences": [{"kind": "low_balance", "email": False, "webhook": True}]}
    assert _refused(_call(scoped, "put", "/api/v1/notifications/preferences/", preferences))
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.active) == (URL, False)
    assert _call(scoped, "get", HOOKS).status_code == 200  # reading stays allowed
