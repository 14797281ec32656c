"""The instance files API acts in the request's acting context, as the rest of the API does: a token
scoped to a team reaches the team's instances only, never its maker's personal ones (where it could
write ``~/.ssh/authorized_keys``), and a personal token never the team's. Another context's instance is
a 404, before anything is read or written."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.services import api_token_create
from gateway import files
from instances.tests.conftest import catalogue, fund, running  # noqa: F401 (a fixture, and helpers)
from teams import services as teams_services

KEYS = "/root/.ssh/authorized_keys"


@pytest.fixture
def writes(monkeypatch, settings) -> list[dict]:
    """What reached the instance's disk: ``file_write`` is the one seam, recorded instead of sent."""
    settings.GATEWAY_ENABLED = True
    made: list[dict] = []

    def file_write(*, instance, path, offset, data):
        made.append({"instance": instance.pk, "path": path})
        return len(data)

    monkeypatch.setattr(files, "file_write", file_write)
    return made


def _put(raw: str, instance, path: str = KEYS):
    return Client().put(
        f"/api/v1/instances/{instance.pk}/files/content/?path={path}&offset=0",
        b"ssh-ed25519 AAAA attacker",
        content_type="application/octet-stream",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )


def test_a_team_token_cannot_write_files_on_its_maker_s_personal_instance(alice, catalogue, writes):  # noqa: F811
    fund(alice, 1_000_000)
    personal = running(alice, name="mine")
    team = teams_services.team_create(user=alice, name="Lab")
    _token, scoped = api_token_create(user=alice, name="lab-ci", expires_at=None, team_id=team.pk)
    response = _put(scoped, personal)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert (
        Client()
        .get(f"/api/v1/instances/{personal.pk}/files/?path=/root", HTTP_AUTHORIZATION=f"Bearer {scoped}")
        .status_code
        == 404
    )
    assert writes == []
    _token, own = api_token_create(user=alice, name="mine", expires_at=None)
    assert _put(own, personal).status_code == 200  # her personal token still reaches it
    assert writes == [{"instance": personal.pk, "path": KEYS}]


def test_a_personal_token_cannot_write_files_on_a_team_instance(alice, catalogue, writes):  # noqa: F811
    team = teams_services.team_create(user=alice, name="Lab")
    fund(team.account, 1_000_000)
    shared = running(team.account, name="lab-box")
    _token, own = api_token_create(user=alice, name="mine", expires_at=None)
    assert _put(own, shared).status_code == 404
    assert writes == []
    _token, scoped = api_token_create(user=alice, name="lab-ci", expires_at=None, team_id=team.pk)
    assert _put(scoped, shared).status_code == 200  # the team's token, in the team's context
    assert len(writes) == 1
