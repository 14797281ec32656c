"""A team member sees the other members' team volumes but may not change them: attaching one to their
own instance is allowed read-only, never read-write (or shared read-write), which would let them
overwrite or wipe a colleague's data. The same rule on the API, the page and a launch with volumes; the
volume's creator and the team's admins attach it read-write as before."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.tests.factories import UserFactory
from instances.errors import NotPermitted
from instances.models import GpuModel, Image, Instance, Region
from instances.services import LaunchRequest, instance_launch
from instances.tests.conftest import catalogue, committed, running  # noqa: F401 (a fixture, and helpers)
from storage import services
from storage.models import Volume, VolumeAttachment
from teams.models import Membership, Role
from teams.tests.helpers import in_team, lab_with_roles


@pytest.fixture
def lab(alice, bob, catalogue):  # noqa: F811 (the fixture imported above)
    team = lab_with_roles(alice, bob)
    team.people["mia"] = UserFactory(email="mia@example.com")
    Membership.objects.create(team=team, user=team.people["mia"], role=Role.MEMBER)
    return team


def _volume_of(team, person) -> Volume:
    with committed():
        volume = services.volume_create(
            user=team.account, actor=person, region=Region.objects.get(slug="cn-north-1"), name="mias-data", size_gb=10
        )
    volume.refresh_from_db()
    return volume


def _instance_of(team, person) -> Instance:
    instance = running(team.account, name=f"{person.email.split('@')[0]}-box")
    Instance.objects.filter(pk=instance.pk).update(created_by=person)
    instance.refresh_from_db()
    return instance


@pytest.mark.parametrize("mode", ["rw", "shared-rw"])
def test_a_view_only_member_cannot_attach_another_member_s_team_volume_read_write(lab, mode):
    bob, mia = lab.people["bob"], lab.people["mia"]
    volume, instance = _volume_of(lab, mia), _instance_of(lab, bob)
    response = in_team(bob, lab).post(
        f"/api/v1/volumes/{volume.pk}/attachments/",
        {"instance": str(instance.pk), "mount_path": "/mnt/data", "mode": mode},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert not VolumeAttachment.objects.exists()


def test_a_view_only_member_may_attach_another_member_s_team_volume_read_only(lab):
    bob, mia = lab.people["bob"], lab.people["mia"]
    volume, instance = _volume_of(lab, mia), _instance_of(lab, bob)
    response = in_team(bob, lab).post(
        f"/api/v1/volumes/{volume.pk}/attachments/",
        {"instance": str(instance.pk), "mount_path": "/mnt/data", "mode": "ro"},
        content_type="application/json",
    )
    assert response.status_code == 201
    assert VolumeAttachment.objects.get().mode == VolumeAttachment.Mode.READ_ONLY


def test_the_page_refuses_a_view_only_member_s_read_write_attach(lab):
    bob, mia = lab.people["bob"], lab.people["mia"]
    volume, instance = _volume_of(lab, mia), _instance_of(lab, bob)
    response = in_team(bob, lab).post(
        reverse("volume_attach", args=[volume.pk]), {"instance": instance.pk, "mount_path": "/mnt/data", "mode": "rw"}
    )
    assert response.status_code in (302, 403)
    assert not VolumeAttachment.objects.exists()


def test_a_launch_cannot_take_another_member_s_team_volume_read_write(lab):
    bob, mia = lab.people["bob"], lab.people["mia"]
    volume = _volume_of(lab, mia)
    with pytest.raises(NotPermitted):
        instance_launch(
            LaunchRequest(
                user=lab.account,
                actor=bob,
                region=Region.objects.get(slug="cn-north-1"),
                gpu_model=GpuModel.objects.get(slug="a800-80g"),
                gpu_count=1,
                image=Image.objects.get(slug="pytorch-2.5-cu124"),
                disk_gb=50,
                volumes=[(volume, "/mnt/data", "rw")],
            )
        )
    assert not VolumeAttachment.objects.exists()


def test_the_volume_s_creator_and_an_admin_still_attach_it_read_write(lab):
    mia, dave = lab.people["mia"], lab.people["dave"]
    volume = _volume_of(lab, mia)
    for person in (mia, dave):
        instance = _instance_of(lab, person)
        response = in_team(person, lab).post(
            f"/api/v1/volumes/{volume.pk}/attachments/",
            {"instance": str(instance.pk), "mount_path": "/mnt/data", "mode": "rw"},
            content_type="application/json",
        )
        assert response.status_code == 201, response.content
        VolumeAttachment.objects.filter(instance=instance).delete()
