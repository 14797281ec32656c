"""The dashboard's one-click trial-credit claim."""

from accounts.tests.factories import UserFactory
from billing.selectors import balance_get


def test_the_dashboard_offers_the_trial_credit(alice_client):
    page = alice_client.get("/dashboard/").content.decode()
    assert "Claim trial credit" in page
    assert 'action="/billing/trial/claim/"' in page
    assert "Add an SSH key" in page and "GPUs and prices" in page  # the rest of the dashboard is intact


def test_claiming_credits_once_and_hides_the_button(alice, alice_client):
    response = alice_client.post("/billing/trial/claim/", {"next": "/dashboard/"}, follow=True)
    assert response.redirect_chain[-1][0] == "/dashboard/"
    page = response.content.decode()
    assert "trial credit of ¥10.00 is ready" in page
    assert "Claim trial credit" not in page
    alice_client.post("/billing/trial/claim/")
    assert balance_get(user=alice).trial == 1000


def test_an_unverified_user_sees_why_not(client_for, db):
    user = UserFactory(verified=False)
    client = client_for(user)
    page = client.get("/dashboard/").content.decode()
    assert "Verify your e-mail address to claim the trial credit." in page
    assert 'action="/billing/trial/claim/"' not in page
    response = client.post("/billing/trial/claim/", follow=True)
    assert "Verify your e-mail address to claim" in response.content.decode()
    assert balance_get(user=user).trial == 0


def test_an_outside_next_is_ignored(alice_client):
    response = alice_client.post("/billing/trial/claim/", {"next": "https://evil.example/"})
    assert response["Location"] == "/dashboard/"


def test_claiming_needs_post(alice_client):
    assert alice_client.get("/billing/trial/claim/").status_code == 405
