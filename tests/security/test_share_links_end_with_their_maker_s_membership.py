"""A share link (``/i/<instance>/s-<token>/``) lends its maker's access to anyone holding the URL, so it
ends with that access: when its maker is removed from the team, or leaves, the links they made on the
team's instances are revoked, and a link whose maker no longer operates the instance does not resolve
even if it somehow escaped the revocation."""

from __future__ import annotations

import pytest

from instances.models import Instance
from instances.tests.conftest import catalogue, running  # noqa: F401 (a fixture, and a helper)
from ports.models import PortShare
from ports.proxy_targets import port_proxy_target
from ports.services import port_declare
from teams import services as teams_services
from teams.models import Membership
from teams.tests.helpers import in_team, lab_with_roles


@pytest.fixture
def lab(alice, bob, catalogue, monkeypatch):  # noqa: F811 (the fixture imported above)
    team = lab_with_roles(alice, bob)
    team.instance = running(team.account, name="team-box")
    Instance.objects.filter(pk=team.instance.pk).update(created_by=bob)
    team.instance.refresh_from_db()
    team.port = port_declare(instance=team.instance, port=6006, name="tb")
    # Where the provider serves the port: the proxy's answer when the link resolves.
    from providers import get_backend

    backend = get_backend(team.instance.backend_alias)
    monkeypatch.setattr(backend, "port_target", lambda *, key, port: f"target:{port}", raising=False)
    return team


def _share_by(person, team) -> PortShare:
    """``person`` makes a link through the API in the team's context, as a member does."""
    response = in_team(person, team).post(
        f"/api/v1/instances/{team.instance.pk}/ports/{team.port.pk}/shares/", {}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    return PortShare.objects.get(pk=response.json()["id"])


def _resolves(share: PortShare) -> bool:
    return port_proxy_target(instance_id=str(share.port.instance_id), service=share.service, user=None) is not None


def test_a_removed_member_s_share_links_on_the_team_s_instances_are_revoked(lab):
    bob, dave = lab.people["bob"], lab.people["dave"]
    bobs, daves = _share_by(bob, lab), _share_by(dave, lab)
    assert _resolves(bobs) and _resolves(daves)
    teams_services.membership_remove(actor=lab.people["alice"], membership=Membership.objects.get(team=lab, user=bob))
    bobs.refresh_from_db()
    daves.refresh_from_db()
    assert bobs.status() == PortShare.Status.REVOKED
    assert not _resolves(bobs)
    assert daves.status() == PortShare.Status.ACTIVE and _resolves(daves)  # another maker's link stays


def test_a_member_who_leaves_loses_their_share_links(lab):
    dave = lab.people["dave"]
    daves = _share_by(dave, lab)
    teams_services.membership_leave(user=dave, team=lab)
    daves.refresh_from_db()
    assert daves.status() == PortShare.Status.REVOKED
    assert not _resolves(daves)


def test_a_share_link_whose_maker_is_no_longer_a_member_does_not_resolve(lab):
    dave = lab.people["dave"]
    daves = _share_by(dave, lab)
    Membership.objects.filter(team=lab, user=dave).delete()  # gone, without the service's revocation
    assert not _resolves(daves)
