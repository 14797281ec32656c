"""Caps on what one person, or nobody at all, can pile up: active API tokens and SSH keys per user
(``ACCOUNTS_MAX_API_TOKENS``, ``ACCOUNTS_MAX_SSH_KEYS``), refused past the cap with a 400
``limit_reached``; and the anonymous device-login starts, whose expired rows a periodic task deletes so
an unauthenticated caller cannot grow the table for ever."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings as django_settings
from django.utils import timezone

from accounts.models import APIToken, SSHKey
from accounts.services import api_token_create, api_token_revoke, ssh_key_add
from accounts.tests import keys
from console.celery import app as celery_app
from devicelogin.models import DeviceAuthorization
from devicelogin.services import device_login_start

TOKENS, SSH_KEYS = "/api/v1/account/tokens/", "/api/v1/account/ssh-keys/"


def _limit_reached(response) -> bool:
    return response.status_code == 400 and response.json()["error"]["code"] == "limit_reached"


def test_a_user_cannot_hold_more_active_api_tokens_than_the_cap(alice, alice_client, settings):
    settings.ACCOUNTS_MAX_API_TOKENS = 3
    made = [api_token_create(user=alice, name=f"t{i}", expires_at=None)[0] for i in range(3)]
    response = alice_client.post(TOKENS, {"name": "one more"}, content_type="application/json")
    assert _limit_reached(response)
    assert "3" in response.json()["error"]["message"]
    assert APIToken.objects.filter(user=alice).count() == 3
    api_token_revoke(token=made[0])  # a revoked one no longer counts
    assert alice_client.post(TOKENS, {"name": "one more"}, content_type="application/json").status_code == 201


def test_an_expired_token_does_not_count_against_the_cap(alice, settings):
    settings.ACCOUNTS_MAX_API_TOKENS = 1
    token, _raw = api_token_create(user=alice, name="old", expires_at=timezone.now() + timedelta(days=1))
    APIToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    api_token_create(user=alice, name="new", expires_at=None)


def test_a_user_cannot_add_more_ssh_keys_than_the_cap(alice, alice_client, settings):
    settings.ACCOUNTS_MAX_SSH_KEYS = 2
    for i in range(2):
        ssh_key_add(user=alice, name=f"k{i}", public_key=keys.ed25519_public())
    response = alice_client.post(
        SSH_KEYS, {"name": "k2", "public_key": keys.ed25519_public()}, content_type="application/json"
    )
    assert _limit_reached(response)
    assert SSHKey.objects.filter(user=alice).count() == 2


def test_the_caps_default_to_fifty():
    assert django_settings.ACCOUNTS_MAX_API_TOKENS == 50
    assert django_settings.ACCOUNTS_MAX_SSH_KEYS == 50


def test_a_device_login_past_the_token_cap_is_refused_with_a_clear_error(client, alice, alice_client, settings):
    settings.ACCOUNTS_MAX_API_TOKENS = 1
    api_token_create(user=alice, name="t", expires_at=None)
    started = client.post("/api/v1/account/device/", {"client_name": "gpuctl"}, content_type="application/json")
    user_code, device_code = started.json()["user_code"], started.json()["device_code"]
    alice_client.post("/account/device/", {"code": user_code, "decision": "approve"})
    response = client.post(
        "/api/v1/account/device/token/", {"device_code": device_code}, content_type="application/json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "limit_reached"


def test_expired_device_login_starts_are_pruned_by_a_periodic_task(db):
    old = [device_login_start(client_name="bot")[0] for _ in range(3)]
    DeviceAuthorization.objects.filter(pk__in=[a.pk for a in old]).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    fresh, _code = device_login_start(client_name="gpuctl")
    schedule = {entry["task"]: entry for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    name = "devicelogin.tasks.device_logins_prune_task"
    assert name in schedule
    task = celery_app.tasks[name]
    assert task() == 3
    assert list(DeviceAuthorization.objects.values_list("pk", flat=True)) == [fresh.pk]
    assert task() == 0  # a second run finds nothing more
