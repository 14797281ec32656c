"""The Secrets page: save, list by name only (the value never comes back, not even in a refused form),
replace, delete; a bad name says why; another account's secret is a 404; a team's roles."""

from __future__ import annotations

from django.urls import reverse

from teams.tests.helpers import in_team, lab_with_roles
from vault.models import Secret
from vault.selectors import secret_values_for_boot

TOKEN = "hf_page_topsecret_value"


def _save(client, name="HF_TOKEN", value=TOKEN):
    return client.post(reverse("secrets"), {"name": name, "value": value})


def test_saved_then_shown_by_name_only(alice, alice_client):
    assert alice_client.get(reverse("secrets")).status_code == 200
    response = _save(alice_client)
    assert response.status_code == 302
    page = alice_client.get(reverse("secrets")).content.decode()
    assert "HF_TOKEN" in page and TOKEN not in page
    assert reverse("secret_delete", args=["HF_TOKEN"]) in page


def test_a_bad_name_is_refused_and_the_value_not_sent_back(alice_client):
    response = _save(alice_client, name="hf-token")
    assert response.status_code == 400
    body = response.content.decode()
    assert "environment variable" in body and TOKEN not in body
    assert not Secret.objects.exists()


def test_replace_and_delete(alice, alice_client):
    _save(alice_client)
    assert alice_client.post(reverse("secret_replace", args=["HF_TOKEN"]), {"value": "v2"}).status_code == 302
    secret = Secret.objects.get()
    assert secret_values_for_boot(owner_id=alice.pk, secret_ids=[secret.pk])[secret.pk] == ("HF_TOKEN", "v2")
    assert alice_client.post(reverse("secret_delete", args=["HF_TOKEN"])).status_code == 302
    assert not Secret.objects.exists()


def test_another_accounts_secret_is_a_404(alice_client, charlie_client):
    _save(alice_client)
    assert charlie_client.post(reverse("secret_replace", args=["HF_TOKEN"]), {"value": "x"}).status_code == 404
    assert charlie_client.post(reverse("secret_delete", args=["HF_TOKEN"])).status_code == 404
    assert 'id="secret-HF_TOKEN"' not in charlie_client.get(reverse("secrets")).content.decode()
    assert Secret.objects.count() == 1


def test_team_roles_on_the_page(alice, bob, catalogue):
    lab = lab_with_roles(alice, bob)
    admin, member, viewer = (in_team(lab.people[who], lab) for who in ("dave", "bob", "erin"))
    assert _save(admin, name="ADMINS").status_code == 302
    page = member.get(reverse("secrets")).content.decode()
    assert "ADMINS" in page and reverse("secret_delete", args=["ADMINS"]) not in page  # seen, no buttons
    assert member.post(reverse("secret_delete", args=["ADMINS"])).status_code == 403
    assert viewer.get(reverse("secrets")).status_code == 403
    assert Secret.objects.get().owner == lab.account
