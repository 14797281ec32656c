"""Deleting an account: scheduled with a warning period (cancellable), then its resources released, its
personal data erased, the ledger and invoices kept and balanced, and an audit record with only a hash."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.test import Client
from django.utils import timezone

from accounts.models import APIToken, SecurityEvent, SSHKey
from accounts.services import api_token_create
from billing.services import ledger_check
from identity.models import PhoneNumber
from instances.models import Instance
from instances.tests.conftest import running
from invoices.models import InvoiceRequest
from privacy import services
from privacy.errors import DeletionRefused
from privacy.models import DeletionRequest
from privacy.tests.conftest import committed
from storage.models import Volume
from storage.tests.conftest import make_volume
from teams.models import Membership, Role
from teams.services import team_create
from vault.models import RegistryCredential, Secret
from vault.services import registry_credential_set, secret_set


def _due(request: DeletionRequest) -> timezone.datetime:
    return request.due_at + timedelta(seconds=1)


def test_a_request_waits_for_the_warning_period_and_can_be_cancelled(alice, settings):
    settings.PRIVACY_DELETION_GRACE_DAYS = 7
    request = services.deletion_request(user=alice)
    assert request.status == DeletionRequest.Status.SCHEDULED
    assert request.due_at - request.requested_at == timedelta(days=7)
    assert services.deletions_due(now=timezone.now() + timedelta(days=6)) == 0
    request.refresh_from_db()
    assert request.status == DeletionRequest.Status.SCHEDULED
    assert services.deletion_cancel(request=request) is True
    assert request.status == DeletionRequest.Status.CANCELLED
    alice.refresh_from_db()
    assert alice.is_active and alice.email == "alice@example.com"


def test_the_whole_deletion_releases_erases_and_keeps_the_books(rich_alice):
    alice = rich_alice
    instance = running(alice, name="trainer")
    volume = make_volume(alice)
    api_token_create(user=alice, name="ci", expires_at=None)
    secret_set(owner=alice, actor=alice, name="WANDB_API_KEY", value="w")
    registry_credential_set(owner=alice, actor=alice, host="registry.example.com", username="ci", password="p")
    PhoneNumber.objects.create(user=alice, number="+8613800138000", verified_at=timezone.now())
    EmailAddress.objects.get_or_create(user=alice, email=alice.email, defaults={"primary": True, "verified": True})
    SecurityEvent.objects.create(user=alice, action=SecurityEvent.Action.LOGIN, ip="198.51.100.7")
    invoice = InvoiceRequest.objects.create(
        user=alice,
        kind=InvoiceRequest.Kind.USAGE,
        month=timezone.localdate().replace(day=1),
        title_type=InvoiceRequest.TitleType.PERSONAL,
        title="Alice Zhang",
        email="alice@example.com",
        amount_fen=100,
    )
    request = services.deletion_request(user=alice)

    with committed():
        services.deletions_due(now=_due(request))
    with committed():  # a second pass finds everything gone and completes (or the first did already)
        services.deletions_due(now=_due(request))
    request.refresh_from_db()
    assert request.status == DeletionRequest.Status.COMPLETED, request.summary

    instance.refresh_from_db()
    volume.refresh_from_db()
    assert instance.status == Instance.Status.RELEASED
    assert volume.status == Volume.Status.DELETED
    alice.refresh_from_db()
    assert alice.email == f"deleted-{alice.pk}@deleted.invalid" and alice.display_name == ""
    assert not alice.is_active and not alice.has_usable_password()
    assert not APIToken.objects.filter(user=alice).exists()
    assert not SSHKey.objects.filter(user=alice).exists()
    assert not Secret.objects.filter(owner=alice).exists()
    assert not RegistryCredential.objects.filter(owner=alice).exists()
    assert not EmailAddress.objects.filter(user=alice).exists()
    assert not SecurityEvent.objects.filter(user=alice).exists()
    assert not PhoneNumber.objects.filter(user=alice).exists()  # identity forgot the number
    invoice.refresh_from_db()
    assert invoice.title == f"deleted-{alice.pk}" and "alice" not in invoice.email
    assert request.email_hash == services.email_hash("Alice@Example.com")
    assert "alice" not in str(request.summary)
    # The ledger is kept (the top-up and the usage are still there) and balances.
    assert alice.ledger_accounts.filter(kind="cash").get().entries.exists()
    check = ledger_check()
    assert check.ok, check.problems


def test_once_due_the_account_can_no_longer_sign_in_nor_use_its_tokens(alice, alice_client, monkeypatch):
    _, raw = api_token_create(user=alice, name="ci", expires_at=None)
    request = services.deletion_request(user=alice)
    assert alice_client.get("/account/data/").status_code == 200
    # The first pass finds a machine still going (a provider's release takes a while): the account is shut
    # while it waits.
    still_going = {"instances_left": 1, "volumes_left": 0, "deployments_left": 0}
    monkeypatch.setattr(services, "_resources_release", lambda **kwargs: still_going)
    services.deletions_due(now=_due(request))
    request.refresh_from_db()
    assert request.status == DeletionRequest.Status.RELEASING
    assert alice_client.get("/account/data/").status_code == 302  # signed out
    assert Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/v1/instances/").status_code == 401


def test_the_only_owner_is_told_why_on_the_page(alice, alice_client):
    team_create(user=alice, name="Lab")
    _just_reauthenticated(alice_client, alice)
    response = alice_client.post("/account/data/delete/", {"confirm": "on"})
    assert response.status_code == 200
    assert "You are the only owner of Lab" in response.content.decode()
    assert not DeletionRequest.objects.exists()


def test_the_due_pass_is_idempotent(alice):
    request = services.deletion_request(user=alice)
    assert services.deletions_due(now=_due(request)) == 1
    assert services.deletions_due(now=_due(request)) == 0
    assert services.deletion_cancel(request=request) is False  # too late


def test_the_only_owner_of_a_team_is_refused_until_ownership_moves(alice, bob):
    team = team_create(user=alice, name="Lab")
    with pytest.raises(DeletionRefused, match="only owner of Lab"):
        services.deletion_request(user=alice)
    Membership.objects.create(team=team, user=bob, role=Role.OWNER)
    request = services.deletion_request(user=alice)
    services.deletions_due(now=_due(request))
    assert not Membership.objects.filter(team=team, user=alice).exists()


def _just_reauthenticated(client, user) -> None:
    """As allauth's re-authentication page leaves the session: the password confirmed just now."""
    session = client.session
    session["account_authentication_methods_user"] = str(user.pk)
    session["account_authentication_methods"] = [{"method": "password", "at": time.time(), "reauthenticated": True}]
    session.save()


def test_the_page_requests_and_cancels(alice, alice_client):
    _just_reauthenticated(alice_client, alice)
    assert "warning period" in alice_client.get("/account/data/delete/").content.decode()
    unticked = alice_client.post("/account/data/delete/", {})
    assert unticked.status_code == 200 and not DeletionRequest.objects.exists()
    response = alice_client.post("/account/data/delete/", {"confirm": "on"})
    assert response.status_code == 302
    request = DeletionRequest.objects.get(user=alice)
    assert "will be deleted on" in alice_client.get("/account/data/").content.decode()
    alice_client.post("/account/data/delete/cancel/")
    request.refresh_from_db()
    assert request.status == DeletionRequest.Status.CANCELLED


def test_the_page_asks_to_reauthenticate_after_a_while(alice, alice_client):
    # force_login leaves no record of a password confirmed: as a session left open for long
    for response in (
        alice_client.get("/account/data/delete/"),
        alice_client.post("/account/data/delete/", {"confirm": "on"}),
    ):
        assert response.status_code == 302 and "reauthenticate" in response.url
    assert not DeletionRequest.objects.exists()


def test_staff_see_the_requests_without_addresses_once_done(alice, staff, client_for):
    request = services.deletion_request(user=alice)
    page = client_for(staff).get("/staff/privacy/").content.decode()
    assert "alice@example.com" in page and "Scheduled" in page
    services.deletions_due(now=_due(request))
    page = client_for(staff).get("/staff/privacy/").content.decode()
    assert "alice@example.com" not in page and "Completed" in page
