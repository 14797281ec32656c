"""The secrets API: names only after saving, values encrypted at rest, the JSON error format, strangers'
404s, and a team's secrets reached in its context (a session acting in it, a token scoped to it) only."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.services import api_token_create
from teams.models import TeamEvent
from teams.tests.helpers import in_team, lab_with_roles
from vault.models import Secret

TOKEN = "wandb-v1-0123456789abcdef-the-real-thing"


def _error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    return error


def _save(client, name="WANDB_API_KEY", value=TOKEN):
    return client.post("/api/v1/secrets/", {"name": name, "value": value}, content_type="application/json")


def _token_client(user, **kwargs) -> APIClient:
    _token, raw = api_token_create(user=user, name="t", expires_at=None, **kwargs)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_a_saved_secret_is_shown_by_its_name_only(alice_client):
    created = _save(alice_client)
    assert created.status_code == 201, created.content
    assert set(created.json()) == {"name", "size", "created_by", "created_at", "updated_at"}
    assert created.json()["size"] == len(TOKEN)
    for response in (alice_client.get("/api/v1/secrets/"), alice_client.get("/api/v1/secrets/WANDB_API_KEY/")):
        assert response.status_code == 200
        assert TOKEN not in response.content.decode()
    assert [s["name"] for s in alice_client.get("/api/v1/secrets/").json()["results"]] == ["WANDB_API_KEY"]


def test_the_value_is_encrypted_at_rest(alice, alice_client):
    _save(alice_client)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {Secret._meta.db_table}")  # noqa: S608 (a model's table)
        rows = cursor.fetchall()
    assert len(rows) == 1
    assert TOKEN not in repr(rows)
    assert "wandb-v1" not in repr(rows).lower() and "real-thing" not in repr(rows)
    from vault.selectors import secret_values_for_boot

    secret = Secret.objects.get()
    assert secret_values_for_boot(owner_id=alice.pk, secret_ids=[secret.pk]) == {secret.pk: ("WANDB_API_KEY", TOKEN)}


def test_replacing_deleting_and_a_taken_name(alice_client):
    _save(alice_client)
    _error(_save(alice_client, value="other"), 409, "secret_exists")
    replaced = alice_client.put("/api/v1/secrets/WANDB_API_KEY/", {"value": "v2"}, content_type="application/json")
    assert replaced.status_code == 200 and replaced.json()["size"] == 2
    _error(
        alice_client.put("/api/v1/secrets/HF_TOKEN/", {"value": "x"}, content_type="application/json"), 404, "not_found"
    )
    assert _save(alice_client, name="HF_TOKEN", value="hf_x").status_code == 201
    assert alice_client.delete("/api/v1/secrets/HF_TOKEN/").status_code == 204
    assert alice_client.get("/api/v1/secrets/HF_TOKEN/").status_code == 404
    assert list(Secret.objects.values_list("name", flat=True)) == ["WANDB_API_KEY"]


@pytest.mark.parametrize(
    "name", ["wandb_api_key", "1TOKEN", "WITH-DASH", "A" * 65, "", "PATH", "LD_PRELOAD", "CONSOLE_GPUS"]
)
def test_a_bad_name_is_a_400_saying_why(alice_client, name):
    error = _error(_save(alice_client, name=name), 400, "invalid")
    assert "name" in error["fields"]
    assert not Secret.objects.exists()


def test_a_name_no_secret_can_have_is_a_json_404_in_the_path(alice_client):
    response = alice_client.put("/api/v1/secrets/bad-name/", {"value": "x"}, content_type="application/json")
    _error(response, 404, "not_found")
    _error(alice_client.get("/api/v1/secrets/A%00B/"), 404, "not_found")


@pytest.mark.parametrize("value", ["", "x" * (64 * 1024 + 1), 0, 12345, True, ["x"]])
def test_an_empty_too_large_or_non_text_value_is_a_400(alice_client, value):
    # A number is not text: DRF would have saved 12345 as "12345", a value the schema says is a string.
    error = _error(_save(alice_client, value=value), 400, "invalid")
    assert "value" in error["fields"]


def test_another_users_secret_is_a_404_whatever_the_credential(alice_client, charlie, charlie_client):
    _save(alice_client)
    for client in (charlie_client, _token_client(charlie)):
        assert client.get("/api/v1/secrets/").json()["results"] == []
        _error(client.get("/api/v1/secrets/WANDB_API_KEY/"), 404, "not_found")
        _error(client.delete("/api/v1/secrets/WANDB_API_KEY/"), 404, "not_found")
    # charlie's PUT by that name is a 404 too; his POST makes his own secret; alice's is untouched.
    _error(
        charlie_client.put("/api/v1/secrets/WANDB_API_KEY/", {"value": "c"}, content_type="application/json"),
        404,
        "not_found",
    )
    assert _save(charlie_client, value="c").status_code == 201
    assert sorted(Secret.objects.values_list("owner__email", "size")) == [
        ("alice@example.com", len(TOKEN)),
        ("charlie@example.com", 1),
    ]


def test_a_team_token_reaches_the_teams_secrets_only(alice, bob, catalogue):
    team = lab_with_roles(alice, bob)
    alice_personal = _token_client(alice)
    alice_team = _token_client(alice, team_id=team.pk)
    assert _save(alice_personal, name="MINE").status_code == 201
    assert _save(alice_team, name="SHARED").status_code == 201
    assert [s["name"] for s in alice_team.get("/api/v1/secrets/").json()["results"]] == ["SHARED"]
    assert [s["name"] for s in alice_personal.get("/api/v1/secrets/").json()["results"]] == ["MINE"]
    _error(alice_team.get("/api/v1/secrets/MINE/"), 404, "not_found")
    assert Secret.objects.get(name="SHARED").owner == team.account
    assert TeamEvent.objects.filter(team=team, action="secret_saved", target="SHARED").exists()


def test_team_roles(alice, bob, catalogue):
    team = lab_with_roles(alice, bob)
    admin, member, viewer = (in_team(team.people[who], team) for who in ("dave", "bob", "erin"))
    assert _save(admin, name="ADMINS").status_code == 201
    assert _save(member, name="BOBS").status_code == 201
    assert {s["name"] for s in member.get("/api/v1/secrets/").json()["results"]} == {"ADMINS", "BOBS"}
    # a member replaces or deletes only what they saved; an admin anything
    _error(
        member.put("/api/v1/secrets/ADMINS/", {"value": "x"}, content_type="application/json"), 403, "permission_denied"
    )
    _error(member.delete("/api/v1/secrets/ADMINS/"), 403, "permission_denied")
    assert member.delete("/api/v1/secrets/BOBS/").status_code == 204
    assert admin.delete("/api/v1/secrets/ADMINS/").status_code == 204
    # a billing viewer sees no secrets and saves none
    _error(viewer.get("/api/v1/secrets/"), 403, "permission_denied")
    _error(_save(viewer), 403, "permission_denied")
