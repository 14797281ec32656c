"""Ports of a team's instance (issue #15): the card for those who may see it, changes and share links
for those who operate it, the proxy for operators only, and nothing for a former member."""

from __future__ import annotations

import pytest

from instances.catalogue import catalogue_seed
from instances.tests.conftest import running
from ports.models import InstancePort
from ports.proxy_targets import port_proxy_target
from ports.services import port_declare, share_create
from teams.models import Membership
from teams.tests.helpers import in_team, lab_with_roles


@pytest.fixture
def lab(alice, bob, db):
    catalogue_seed()
    team = lab_with_roles(alice, bob)
    team.instance = running(team.account, name="team-box")
    team.port = port_declare(instance=team.instance, port=6006, name="tb")
    team.share = share_create(port=team.port)
    return team


# bob is a member who did not launch the instance: he sees its ports, not its share links' URLs.
@pytest.mark.parametrize(
    ("who", "card", "forms", "add"),
    [("alice", 200, True, 200), ("dave", 200, True, 200), ("bob", 200, False, 403), ("erin", 404, False, 404)],
)
def test_roles_on_the_card(lab, who, card, forms, add):
    client = in_team(lab.people[who], lab)
    response = client.get(f"/instances/{lab.instance.pk}/ports/", HTTP_HX_REQUEST="true")
    assert response.status_code == card
    if card == 200:
        body = response.content.decode()
        assert (f"/instances/{lab.instance.pk}/ports/add/" in body) is forms
        assert (lab.share.token in body) is forms
    response = client.post(f"/instances/{lab.instance.pk}/ports/add/", {"port": 8080}, HTTP_HX_REQUEST="true")
    assert response.status_code == add
    assert InstancePort.objects.filter(port=8080).exists() is (add == 200)


def test_the_api_hides_share_links_from_viewers_and_refuses_their_changes(lab):
    bob = in_team(lab.people["bob"], lab)
    ports = bob.get(f"/api/v1/instances/{lab.instance.pk}/ports/").json()
    assert ports[0]["shares"][0]["url"] is None
    response = bob.delete(f"/api/v1/instances/{lab.instance.pk}/ports/{lab.port.pk}/")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    dave = in_team(lab.people["dave"], lab)
    assert dave.get(f"/api/v1/instances/{lab.instance.pk}/ports/").json()[0]["shares"][0]["url"]


def test_the_proxy_serves_operators_only_and_a_former_admin_loses_it_at_once(lab, charlie):
    def target(user):
        return port_proxy_target(instance_id=str(lab.instance.pk), service="p6006", user=user)

    assert target(lab.people["dave"]) is not None
    assert target(lab.people["alice"]) is not None
    assert target(lab.people["bob"]) is None  # sees the instance, does not operate it
    assert target(lab.people["erin"]) is None
    assert target(charlie) is None
    Membership.objects.filter(team=lab, user=lab.people["dave"]).delete()
    assert target(lab.people["dave"]) is None
