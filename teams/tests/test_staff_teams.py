"""Staff see teams: a list of every team with its members and balance, and a team's account named as
the team wherever staff see accounts (billing's staff page, refunds, the admin)."""

from __future__ import annotations

from billing.services import balance_adjust
from billing.tests.helpers import topup
from teams import services
from teams.templatetags.teams_tags import account_label


def test_staff_list_every_team_with_members_and_balance(client_for, staff, staffed, charlie):
    topup(staffed.account, 12_345)
    other = services.team_create(user=charlie, name="Other lab")
    services.team_delete(actor=charlie, team=other)
    page = client_for(staff).get("/staff/teams/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Lab" in text and "¥123.45" in text and "Other lab" in text and "Deleted" in text
    row = text.split('id="staff-team-list"')[1].split("</tr>")[1]
    assert '<td class="num">4</td>' in row  # alice, bob, dave, erin


def test_the_list_is_one_query_however_many_teams(client_for, staff, alice, django_assert_max_num_queries):
    for n in range(15):
        team = services.team_create(user=alice, name=f"T{n}")
        topup(team.account, 100 + n)
    client = client_for(staff)
    client.get("/staff/teams/")
    # 8, and one for staff's second factor (accounts.two_factor: a staff member without one reaches no page).
    with django_assert_max_num_queries(9):
        assert client.get("/staff/teams/").status_code == 200


def test_others_get_404(alice_client, client):
    assert alice_client.get("/staff/teams/").status_code == 404
    assert client.get("/staff/teams/").status_code == 404


def test_a_team_account_is_labelled_as_the_team(team, alice):
    assert "Lab" in account_label(team.account) and "team" in account_label(team.account)
    assert account_label(alice) == "alice@example.com"


def test_the_staff_billing_page_names_the_team(client_for, staff, team):
    balance_adjust(user=team.account, amount_fen=500, reason="Goodwill", staff_user=staff)
    text = client_for(staff).get("/staff/billing/").content.decode()
    assert 'Lab <span class="badge indigo">team</span>' in text
    assert "@teams.invalid" not in text


def test_the_admin_lists_teams_with_members_and_balance(client_for, staff, staffed):
    topup(staffed.account, 2_000)
    text = client_for(staff).get("/admin/teams/team/").content.decode()
    assert "¥20.00" in text
