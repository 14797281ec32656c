"""Moving paid money between a person's wallet and their team's: roles, short balances, repeats, the
audit event, and the page and API that do it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from billing.models import Transaction
from billing.selectors import balance_get
from billing.services import ledger_check, trial_claim
from billing.tests.helpers import topup
from teams import services
from teams.errors import NotEnoughMoney, TeamForbidden, TeamInvalid
from teams.models import TeamEvent
from teams.tests.conftest import add_member

IN, OUT = services.MONEY_IN, services.MONEY_OUT


def cash(user) -> int:
    return balance_get(user=user).cash


def move(actor, team, direction, amount, key="k1"):
    return services.team_money_move(actor=actor, team=team, direction=direction, amount_fen=amount, key=key)


def test_an_owner_pays_into_the_team_in_one_transaction(alice, team):
    topup(alice, 10_000)
    txn, created = move(alice, team, IN, 2_500)
    assert created and txn.kind == Transaction.Kind.TRANSFER
    assert (cash(alice), cash(team.account)) == (7_500, 2_500)
    assert sorted(e.amount for e in txn.entries.all()) == [-2_500, 2_500]
    event = TeamEvent.objects.get(team=team, action=TeamEvent.Action.MONEY_MOVED)
    assert event.actor == alice and event.details == {"direction": IN, "amount_fen": 2_500, "transaction": txn.pk}


def test_a_repeat_of_the_key_moves_once_and_audits_once(alice, team):
    topup(alice, 10_000)
    first, _ = move(alice, team, IN, 1_000, key="same")
    again, created = move(alice, team, IN, 1_000, key="same")
    assert again.pk == first.pk and not created
    assert cash(team.account) == 1_000
    assert TeamEvent.objects.filter(team=team, action=TeamEvent.Action.MONEY_MOVED).count() == 1


def test_a_short_balance_is_refused_and_moves_nothing(alice, team):
    topup(alice, 500)
    with pytest.raises(NotEnoughMoney, match="does not cover"):
        move(alice, team, IN, 501)
    assert (cash(alice), cash(team.account)) == (500, 0)
    assert not TeamEvent.objects.filter(team=team, action=TeamEvent.Action.MONEY_MOVED).exists()


def test_trial_credit_never_moves(alice, team):
    trial_claim(user=alice)  # the factory's users have a verified address
    assert balance_get(user=alice).trial > 0
    with pytest.raises(NotEnoughMoney):
        move(alice, team, IN, 1)


def test_an_admin_pays_in_but_only_an_owner_takes_money_out(alice, dave, team):
    add_member(team, dave, "admin")
    topup(dave, 3_000)
    move(dave, team, IN, 3_000)
    with pytest.raises(TeamForbidden):
        move(dave, team, OUT, 1_000, key="k2")
    move(alice, team, OUT, 1_000, key="k3")
    assert (cash(dave), cash(alice), cash(team.account)) == (0, 1_000, 2_000)


def test_an_owner_cannot_take_out_more_than_the_team_holds(alice, team):
    topup(alice, 1_000)
    move(alice, team, IN, 1_000)
    with pytest.raises(NotEnoughMoney, match="team's paid balance"):
        move(alice, team, OUT, 1_001, key="k2")
    assert cash(team.account) == 1_000


@pytest.mark.parametrize("role", ["member", "billing"])
def test_members_and_billing_viewers_move_no_money(bob, team, role):
    add_member(team, bob, role)
    topup(bob, 1_000)
    for direction in (IN, OUT):
        with pytest.raises(TeamForbidden):
            move(bob, team, direction, 100)
    assert cash(bob) == 1_000


def test_a_stranger_moves_no_money(charlie, team):
    topup(charlie, 1_000)
    with pytest.raises(TeamForbidden):
        move(charlie, team, IN, 100)


@pytest.mark.parametrize("amount", [0, -5, 10**13, True, 1.5])
def test_bad_amounts_are_refused(alice, team, amount):
    topup(alice, 1_000)
    with pytest.raises(TeamInvalid):
        move(alice, team, IN, amount)


def test_the_ledger_still_balances(alice, team):
    topup(alice, 5_000)
    move(alice, team, IN, 4_000)
    move(alice, team, OUT, 1_500, key="k2")
    assert ledger_check().ok


# --- The page ---------------------------------------------------------------------------------------


def test_the_wallet_page_by_role(client_for, staffed, charlie):
    for who, status in [("alice", 200), ("dave", 200), ("erin", 200), ("bob", 403)]:
        user = staffed.memberships.get(user__email=f"{who}@example.com").user
        assert client_for(user).get("/teams/lab/wallet/").status_code == status, who
    assert client_for(charlie).get("/teams/lab/wallet/").status_code == 404


def test_the_page_shows_the_form_to_those_who_may_move(client_for, staffed):
    alice = staffed.memberships.get(role="owner").user
    erin = staffed.memberships.get(role="billing").user
    dave = staffed.memberships.get(role="admin").user
    assert 'id="move-money"' in client_for(alice).get("/teams/lab/wallet/").content.decode()
    assert 'id="move-money"' not in client_for(erin).get("/teams/lab/wallet/").content.decode()
    admin_page = client_for(dave).get("/teams/lab/wallet/").content.decode()
    assert 'id="move-money"' in admin_page and 'value="out"' not in admin_page


def test_the_form_moves_money_once(alice_client, alice, team):
    topup(alice, 10_000)
    form = {"direction": IN, "amount": "12.34", "key": "form-key-1"}
    response = alice_client.post("/teams/lab/wallet/move/", form)
    assert response.status_code == 302
    alice_client.post("/teams/lab/wallet/move/", form)  # a double click
    assert cash(team.account) == 1_234
    page = alice_client.get("/teams/lab/wallet/").content.decode()
    assert "¥12.34" in page


def test_the_form_says_why_it_refused(alice_client, alice, team):
    topup(alice, 100)
    response = alice_client.post("/teams/lab/wallet/move/", {"direction": IN, "amount": "5", "key": "k"})
    assert response.status_code == 400
    assert "does not cover" in response.content.decode()
    response = alice_client.post("/teams/lab/wallet/move/", {"direction": IN, "amount": "abc", "key": "k"})
    assert response.status_code == 400


def test_a_billing_viewer_posting_the_form_gets_403(client_for, staffed):
    erin = staffed.memberships.get(role="billing").user
    topup(erin, 1_000)
    response = client_for(erin).post("/teams/lab/wallet/move/", {"direction": IN, "amount": "1", "key": "k"})
    assert response.status_code == 403
    assert cash(erin) == 1_000


# --- The API ----------------------------------------------------------------------------------------


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_api_moves_money_with_an_idempotency_key(alice, team):
    topup(alice, 10_000)
    client = api_for(alice)
    body = {"direction": IN, "amount_fen": 700}
    first = client.post("/api/v1/teams/lab/wallet/transfers/", body, format="json", headers={"Idempotency-Key": "a1"})
    again = client.post("/api/v1/teams/lab/wallet/transfers/", body, format="json", headers={"Idempotency-Key": "a1"})
    assert first.status_code == 201 and again.status_code == 201
    assert first.json()["team_cash_fen"] == 700 and first.json()["your_cash_fen"] == 9_300
    assert cash(team.account) == 700
    assert client.get("/api/v1/teams/lab/wallet/").json()["cash_fen"] == 700


def test_the_api_answers_a_short_balance_with_409(alice, team):
    response = api_for(alice).post(
        "/api/v1/teams/lab/wallet/transfers/", {"direction": IN, "amount_fen": 1}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "insufficient_funds"


def test_the_api_by_role(staffed, charlie):
    people = {m.user.email.split("@")[0]: m.user for m in staffed.memberships.select_related("user")}
    for who in people.values():
        topup(who, 1_000)
    body = {"direction": IN, "amount_fen": 10}
    assert api_for(people["bob"]).post("/api/v1/teams/lab/wallet/transfers/", body, format="json").status_code == 403
    assert api_for(people["erin"]).post("/api/v1/teams/lab/wallet/transfers/", body, format="json").status_code == 403
    assert api_for(people["dave"]).post("/api/v1/teams/lab/wallet/transfers/", body, format="json").status_code == 201
    out = {"direction": OUT, "amount_fen": 10}
    assert api_for(people["dave"]).post("/api/v1/teams/lab/wallet/transfers/", out, format="json").status_code == 403
    assert api_for(charlie).post("/api/v1/teams/lab/wallet/transfers/", body, format="json").status_code == 404
    assert api_for(charlie).get("/api/v1/teams/lab/wallet/").status_code == 404
    assert api_for(people["bob"]).get("/api/v1/teams/lab/wallet/").status_code == 403
    assert api_for(people["erin"]).get("/api/v1/teams/lab/wallet/").status_code == 200
