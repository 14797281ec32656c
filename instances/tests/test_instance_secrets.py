"""Secrets chosen for an instance (issue #27): at launch or later, by name; their values reach the provider
only in the spec of each boot (create, start, restart), never in the console's tables or the machine's
saved state; a replaced value or a changed choice takes effect at the next boot."""

from __future__ import annotations

import json

import pytest

from instances.models import Instance, InstanceSecret
from instances.services import common, instance_restart, instance_secrets_set, instance_start, instance_stop
from instances.tests.conftest import committed, running
from providers import SecretValue
from providers.simulated.backend import SimulatedBackend
from teams.tests.helpers import in_team, lab_with_roles
from vault.models import Secret
from vault.services import secret_delete, secret_set

TOKEN = "wandb-v1-topsecret-0123456789"


@pytest.fixture
def wandb(rich_alice):
    secret, _created = secret_set(owner=rich_alice, actor=rich_alice, name="WANDB_API_KEY", value=TOKEN)
    return secret


@pytest.fixture
def boots(monkeypatch):
    """The specs the simulated provider is given at each create, start and restart."""
    seen: list = []
    for verb in ("create", "start", "restart"):
        original = getattr(SimulatedBackend, verb)

        def record(self, *args, _original=original, **kwargs):
            seen.append(kwargs.get("spec"))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(SimulatedBackend, verb, record)
    return seen


LAUNCH = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124"}


def _launch(client, **extra):
    with committed():
        return client.post("/api/v1/instances/", {**LAUNCH, **extra}, content_type="application/json")


def test_a_launch_with_a_secret_boots_with_its_value(alice_client, wandb, boots):
    response = _launch(alice_client, secrets=[{"name": "WANDB_API_KEY", "env": True}])
    assert response.status_code == 201, response.content
    assert boots[0].secrets == (SecretValue(name="WANDB_API_KEY", value=TOKEN, env=True),)
    assert TOKEN not in repr(boots[0])  # a logged spec shows no value
    instance = Instance.objects.get(pk=response.json()["id"])
    chosen = alice_client.get(f"/api/v1/instances/{instance.pk}/secrets/")
    assert chosen.json() == [{"name": "WANDB_API_KEY", "env": True}]
    # Nothing of the value in what the console keeps: the instance's row (its saved state), its events.
    instance.refresh_from_db()
    assert TOKEN not in json.dumps(instance.backend_state) + json.dumps(instance.entry_points or {})
    assert not any(TOKEN in (e.reason or "") for e in instance.events.all())


def test_another_accounts_secret_does_not_exist_at_launch(alice_client, charlie, wandb):
    secret_set(owner=charlie, actor=charlie, name="CHARLIES", value="c")
    response = _launch(alice_client, secrets=[{"name": "CHARLIES"}])
    assert response.status_code == 400
    assert "secrets" in response.json()["error"]["fields"]
    assert not Instance.objects.exists()


def test_a_choice_takes_effect_at_the_next_start(rich_alice, alice_client, wandb, boots):
    instance = running(rich_alice)
    assert boots[-1].secrets == ()
    with committed():
        instance_stop(instance=instance)
    chosen = alice_client.put(
        f"/api/v1/instances/{instance.pk}/secrets/",
        {"secrets": [{"name": "WANDB_API_KEY"}]},
        content_type="application/json",
    )
    assert chosen.status_code == 200 and chosen.json() == [{"name": "WANDB_API_KEY", "env": False}]
    secret_set(owner=rich_alice, actor=rich_alice, name="WANDB_API_KEY", value="replaced")
    instance.refresh_from_db()
    with committed():
        instance_start(instance=instance)
    assert boots[-1].secrets == (SecretValue(name="WANDB_API_KEY", value="replaced", env=False),)


def test_a_deleted_secret_is_gone_at_the_next_restart(rich_alice, wandb, boots):
    instance = running(rich_alice)
    instance_secrets_set(instance=instance, choices=[(wandb, True)])
    instance.refresh_from_db()
    with committed():
        instance_restart(instance=instance)
    assert [s.name for s in boots[-1].secrets] == ["WANDB_API_KEY"]
    secret_delete(secret=wandb, actor=rich_alice)
    assert not InstanceSecret.objects.exists()
    instance.refresh_from_db()
    with committed():
        instance_restart(instance=instance)
    assert boots[-1].secrets == ()


def test_the_spec_is_the_only_place_with_the_value(rich_alice, wandb):
    instance = running(rich_alice)
    instance_secrets_set(instance=instance, choices=[(wandb, False)])
    assert TOKEN not in Secret.objects.get().ciphertext
    assert common._spec(common._get(instance.pk)).secrets[0].value == TOKEN


def test_strangers_and_teammates(alice, bob, charlie_client, catalogue):
    lab = lab_with_roles(alice, bob)
    secret, _ = secret_set(owner=lab.account, actor=alice, name="HF_TOKEN", value="hf")
    mine, _ = secret_set(owner=alice, actor=alice, name="MINE", value="m")
    with committed():
        response = _launch(in_team(alice, lab), secrets=[{"name": "HF_TOKEN", "env": True}])
    assert response.status_code == 201, response.content
    url = f"/api/v1/instances/{response.json()['id']}/secrets/"
    body = {"secrets": []}
    # A member sees a colleague's choice and may not change it; a stranger finds nothing.
    member = in_team(bob, lab)
    assert member.get(url).json() == [{"name": "HF_TOKEN", "env": True}]
    assert member.put(url, body, content_type="application/json").status_code == 403
    assert charlie_client.get(url).status_code == 404
    assert charlie_client.put(url, body, content_type="application/json").status_code == 404
    # alice's personal secret is not a choice for the team's instance.
    personal = in_team(alice, lab).put(url, {"secrets": [{"name": "MINE"}]}, content_type="application/json")
    assert personal.status_code == 400
    assert list(InstanceSecret.objects.values_list("secret__name", flat=True)) == ["HF_TOKEN"]
    assert mine.pk and secret.pk


def test_the_launch_page_offers_the_secrets_and_launches_with_them(rich_alice, alice_client, wandb, boots):
    from django.urls import reverse

    from instances.models import GpuModel, Image, Region

    page = alice_client.get(reverse("instance_launch")).content.decode()
    assert "WANDB_API_KEY" in page and TOKEN not in page
    response = alice_client.post(
        reverse("instance_launch"),
        {
            "region": Region.objects.get(slug="cn-north-1").pk,
            "gpu_model": GpuModel.objects.get(slug="a800-80g").pk,
            "gpu_count": 1,
            "image": Image.objects.get(slug="pytorch-2.5-cu124").pk,
            "disk_gb": 50,
            "name": "with-secrets",
            "secret_WANDB_API_KEY_env": "on",  # the variable implies the file
        },
    )
    assert response.status_code == 302, response.content.decode()[:500]
    instance = Instance.objects.get(name="with-secrets")
    assert list(instance.secret_choices.values_list("secret__name", "env")) == [("WANDB_API_KEY", True)]


def test_the_instance_page_changes_the_choice(rich_alice, alice_client, wandb, boots):
    from django.urls import reverse

    instance = running(rich_alice)
    page = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert reverse("instance_secrets", args=[instance.pk]) in page and TOKEN not in page
    response = alice_client.post(reverse("instance_secrets", args=[instance.pk]), {"use_WANDB_API_KEY": "on"})
    assert response.status_code == 302
    assert list(instance.secret_choices.values_list("secret__name", "env")) == [("WANDB_API_KEY", False)]
    alice_client.post(reverse("instance_secrets", args=[instance.pk]), {})
    assert not instance.secret_choices.exists()
