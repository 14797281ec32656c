"""Volumes in a team's context: who sees, creates, changes and attaches them (issue #15).

Alice owns "Lab"; dave is an admin, bob a member, erin a billing viewer; charlie is a stranger."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from instances.models import Region
from instances.tests.conftest import committed, running
from storage import services
from storage.models import Volume
from storage.tests.conftest import make_volume
from teams.models import Membership, TeamEvent
from teams.tests.helpers import in_team, lab_with_roles


@pytest.fixture
def lab(alice, bob, catalogue):
    return lab_with_roles(alice, bob)


def team_volume(team, *, by, name="shared") -> Volume:
    with committed():
        volume = services.volume_create(
            user=team.account, actor=by, region=Region.objects.get(slug="cn-north-1"), name=name, size_gb=10
        )
    volume.refresh_from_db()
    return volume


# Who sees what: the list, a volume's page (with or without its buttons), a change.
@pytest.mark.parametrize(
    ("who", "list_status", "detail_status", "buttons", "delete_status"),
    [
        ("alice", 200, 200, True, 302),  # the owner
        ("dave", 200, 200, True, 302),  # an admin
        ("bob", 200, 200, False, 403),  # a member: another's volume is shown, not operable
        ("erin", 403, 404, False, 404),  # a billing viewer sees no resources
    ],
)
def test_roles_on_the_pages(lab, who, list_status, detail_status, buttons, delete_status):
    volume = team_volume(lab, by=lab.people["alice"])
    client = in_team(lab.people[who], lab)
    assert client.get(reverse("storage")).status_code == list_status
    response = client.get(reverse("volume_detail", args=[volume.pk]))
    assert response.status_code == detail_status
    if detail_status == 200:
        body = response.content.decode()
        assert (reverse("volume_delete", args=[volume.pk]) in body) is buttons
        assert (reverse("volume_resize", args=[volume.pk]) in body) is buttons
    with committed():
        response = client.post(reverse("volume_delete", args=[volume.pk]))
    assert response.status_code == delete_status
    volume.refresh_from_db()
    assert (volume.status in (Volume.Status.DELETING, Volume.Status.DELETED)) is (delete_status == 302)


def test_a_member_creates_a_team_volume_and_changes_it_and_the_audit_log_says_so(lab, bob):
    client = in_team(bob, lab)
    region = Region.objects.get(slug="cn-north-1")
    with committed():
        response = client.post(reverse("storage"), {"name": "runs", "region": region.pk, "size_gb": 20})
    assert response.status_code == 302
    volume = Volume.objects.get(name="runs")
    assert volume.owner_id == lab.account.pk and volume.created_by_id == bob.pk
    assert TeamEvent.objects.filter(team=lab, actor=bob, action=TeamEvent.Action.VOLUME_CREATED).exists()
    assert "runs" in client.get(reverse("storage")).content.decode()
    # Not in bob's personal context: a team's volume is the team's.
    personal = Client()
    personal.force_login(bob)
    assert reverse("volume_detail", args=[volume.pk]) not in personal.get(reverse("storage")).content.decode()
    with committed():
        assert client.post(reverse("volume_delete", args=[volume.pk])).status_code == 302
    assert TeamEvent.objects.filter(team=lab, actor=bob, action=TeamEvent.Action.VOLUME_DELETED).exists()


def test_a_billing_viewer_cannot_create(lab):
    client = in_team(lab.people["erin"], lab)
    region = Region.objects.get(slug="cn-north-1")
    response = client.post(reverse("storage"), {"name": "x", "region": region.pk, "size_gb": 20})
    assert response.status_code == 403
    assert not Volume.objects.filter(name="x").exists()


def test_a_stranger_and_a_former_member_get_404_at_once(lab, charlie, bob):
    volume = team_volume(lab, by=bob)
    assert in_team(charlie, lab).get(reverse("volume_detail", args=[volume.pk])).status_code == 404
    client = in_team(bob, lab)
    assert client.get(reverse("volume_detail", args=[volume.pk])).status_code == 200
    Membership.objects.filter(team=lab, user=bob).delete()
    assert client.get(reverse("volume_detail", args=[volume.pk])).status_code == 404
    assert client.post(reverse("volume_delete", args=[volume.pk])).status_code == 404


@pytest.mark.parametrize(("who", "status"), [("dave", 202), ("bob", 403), ("erin", 403)])
def test_the_api_answers_403_with_a_message(lab, who, status):
    volume = team_volume(lab, by=lab.people["alice"])
    client = in_team(lab.people[who], lab)
    with committed():
        response = client.delete(f"/api/v1/volumes/{volume.pk}/")
    assert response.status_code == status
    if status == 403:
        assert response.json()["error"]["code"] == "permission_denied"
        assert response.json()["error"]["message"]


def test_the_api_lists_the_teams_volumes_in_the_team_context(lab, bob, alice):
    team_volume(lab, by=alice, name="shared")
    names = [v["name"] for v in in_team(bob, lab).get("/api/v1/volumes/").json()["results"]]
    assert names == ["shared"]
    assert in_team(lab.people["erin"], lab).get("/api/v1/volumes/").status_code == 403


# The attach rule works through the account.


def test_a_team_volume_attaches_to_any_team_instance_and_never_across_accounts(lab, alice, rich_alice):
    volume = team_volume(lab, by=lab.people["bob"])
    team_instance = running(lab.account)
    attachment = services.volume_attach(user=lab.account, volume=volume, instance=team_instance, mount_path="/mnt/a")
    assert attachment.instance_id == team_instance.pk

    personal_instance = running(alice)
    personal_volume = make_volume(alice, name="own")
    with pytest.raises(services.VolumeInvalid):
        services.volume_attach(user=lab.account, volume=personal_volume, instance=team_instance, mount_path="/mnt/b")
    with pytest.raises(services.VolumeInvalid):
        services.volume_attach(user=alice, volume=volume, instance=personal_instance, mount_path="/mnt/b")


def test_an_admin_attaches_from_the_page_and_only_team_instances_are_offered(lab, rich_alice, alice):
    volume = team_volume(lab, by=lab.people["bob"])
    team_instance = running(lab.account, name="team-box")
    running(alice, name="alice-box")
    client = in_team(lab.people["dave"], lab)
    body = client.get(reverse("volume_detail", args=[volume.pk])).content.decode()
    assert "team-box" in body and "alice-box" not in body
    response = client.post(
        reverse("volume_attach", args=[volume.pk]),
        {"instance": team_instance.pk, "mount_path": "/mnt/data", "mode": "rw"},
    )
    assert response.status_code == 302
    assert volume.attachments.filter(instance=team_instance).exists()
    # A billing viewer cannot attach, even by a forced POST.
    response = in_team(lab.people["erin"], lab).post(
        reverse("volume_attach", args=[volume.pk]),
        {"instance": team_instance.pk, "mount_path": "/mnt/other", "mode": "ro"},
    )
    assert response.status_code == 404
