"""Staff find users, SSH keys and API tokens in the admin by searching; tokens never show a secret."""

from __future__ import annotations

import pytest

from accounts.models import APIToken, User
from accounts.services import api_token_create, ssh_key_add
from accounts.tests.keys import ed25519_public


@pytest.fixture
def staff_client(client_for, staff):
    return client_for(staff)


@pytest.fixture
def credentials(alice, charlie):
    """alice's and charlie's SSH keys and API tokens, and alice's raw token."""
    ssh_key_add(user=alice, name="alice-laptop", public_key=ed25519_public("alice@laptop"))
    ssh_key_add(user=charlie, name="charlie-desktop", public_key=ed25519_public("charlie@desktop"))
    alice_token, alice_raw = api_token_create(user=alice, name="alice-ci", expires_at=None)
    api_token_create(user=charlie, name="charlie-script", expires_at=None)
    return alice_token, alice_raw


@pytest.mark.parametrize(
    ("changelist", "alice_row", "charlie_row"),
    [
        ("user", "alice@example.com", "charlie@example.com"),
        ("sshkey", "alice-laptop", "charlie-desktop"),
        ("apitoken", "alice-ci", "charlie-script"),
    ],
)
def test_staff_find_alice_by_her_e_mail_in_each_changelist(
    staff_client, credentials, changelist, alice_row, charlie_row
):
    response = staff_client.get(f"/admin/accounts/{changelist}/", {"q": "alice@"})
    assert response.status_code == 200
    page = response.content.decode()
    assert alice_row in page and charlie_row not in page


def test_staff_find_a_user_by_display_name(staff_client, alice, charlie):
    page = staff_client.get("/admin/accounts/user/", {"q": "Charl"}).content.decode()
    assert "charlie@example.com" in page and "alice@example.com" not in page


def test_staff_find_a_key_by_fingerprint_and_a_token_by_prefix(staff_client, credentials):
    alice_token, _ = credentials
    fingerprint = alice_token.user.ssh_keys.get().fingerprint
    page = staff_client.get("/admin/accounts/sshkey/", {"q": fingerprint}).content.decode()
    assert "alice-laptop" in page and "charlie-desktop" not in page
    page = staff_client.get("/admin/accounts/apitoken/", {"q": alice_token.prefix}).content.decode()
    assert "alice-ci" in page and "charlie-script" not in page


def test_a_token_shows_neither_its_secret_nor_its_digest(staff_client, credentials):
    alice_token, alice_raw = credentials
    for url in ("/admin/accounts/apitoken/", f"/admin/accounts/apitoken/{alice_token.pk}/change/"):
        response = staff_client.get(url)
        assert response.status_code == 200
        page = response.content.decode()
        assert alice_token.prefix in page
        assert alice_raw not in page and alice_token.digest not in page


def test_staff_revoke_tokens_once(staff_client, credentials):
    alice_token, _ = credentials
    for _ in range(2):
        response = staff_client.post(
            "/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [alice_token.pk]}, follow=True
        )
        assert response.status_code == 200
    alice_token.refresh_from_db()
    assert alice_token.status() == APIToken.Status.REVOKED
    assert APIToken.objects.filter(revoked_at__isnull=False).count() == 1  # charlie's is untouched
    page = staff_client.get("/admin/accounts/apitoken/", {"status": "revoked"}).content.decode()
    assert "alice-ci" in page and "charlie-script" not in page


def test_staff_add_a_user_by_e_mail(staff_client, db):
    response = staff_client.post(
        "/admin/accounts/user/add/",
        {
            "email": "Dora@Example.com",
            "usable_password": "true",
            "password1": "a long passphrase 7",
            "password2": "a long passphrase 7",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    dora = User.objects.get(email="dora@example.com")
    assert dora.check_password("a long passphrase 7")


def test_staff_open_a_user_to_edit(staff_client, alice):
    response = staff_client.get(f"/admin/accounts/user/{alice.pk}/change/")
    assert response.status_code == 200
    assert "alice@example.com" in response.content.decode()


def test_alice_is_not_staff_and_gets_the_login_page(alice_client):
    for changelist in ("user", "sshkey", "apitoken"):
        assert alice_client.get(f"/admin/accounts/{changelist}/").status_code == 302
