from __future__ import annotations

from teams import services
from teams.tests.conftest import add_member


def test_staff_see_teams_memberships_invitations_and_events(client_for, staff, team, alice, bob):
    add_member(team, bob)
    services.invitation_create(actor=alice, team=team, email="x@example.com", role="member", site_url="http://t/")
    client = client_for(staff)
    for url in [
        "/admin/teams/team/",
        f"/admin/teams/team/{team.pk}/change/",
        "/admin/teams/invitation/",
        "/admin/teams/teamevent/",
    ]:
        response = client.get(url)
        assert response.status_code == 200, url
    assert "digest" not in client.get(f"/admin/teams/invitation/{team.invitations.get().pk}/change/").content.decode()
