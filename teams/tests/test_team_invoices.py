"""发票 in a team's context: the team's top-ups are what can be invoiced, the request is the team's, and
only those who may see the team's billing reach the page and its PDFs."""

from __future__ import annotations

from billing.tests.gateway_helpers import paid_order
from invoices.models import InvoiceRequest


def acting(client, slug="lab"):
    assert client.post("/teams/switch/", {"team": slug}).status_code == 302
    return client


def person(team, role):
    return team.memberships.select_related("user").get(role=role).user


def test_an_invoice_asked_in_the_team_is_the_teams(client_for, alice, staffed):
    mine, teams = paid_order(alice, 3000), paid_order(staffed.account, 5000)
    client = client_for(alice)
    assert f'value="order:{mine.pk}"' in client.get("/billing/invoices/").content.decode()  # Personal: mine
    page = acting(client).get("/billing/invoices/").content.decode()
    assert f'value="order:{teams.pk}"' in page and f'value="order:{mine.pk}"' not in page
    response = client.post(
        "/billing/invoices/",
        {
            "covers": f"order:{teams.pk}",
            "amount": "50",
            "title_type": "personal",
            "title": "Lab",
            "email": "a@example.com",
        },
    )
    assert response.status_code == 302
    assert InvoiceRequest.objects.get().user == staffed.account


def test_billing_viewers_reach_the_teams_invoices_and_members_do_not(client_for, staffed):
    paid_order(staffed.account, 5000)
    erin, bob = person(staffed, "billing"), person(staffed, "member")
    assert acting(client_for(erin)).get("/billing/invoices/").status_code == 200
    assert acting(client_for(bob)).get("/billing/invoices/").status_code == 403
    assert client_for(bob).get("/billing/invoices/").status_code == 200  # their own, in Personal
