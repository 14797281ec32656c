"""Save as image on the pages: the instance page's form saves it, the Images page lists it with its size and
state, "Launch from it" preselects it on the launch page and the launch pins its digest; a team member
sees a colleague's image once it is shared; charlie gets a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.tests.factories import UserFactory
from instances.models import Image, Instance
from instances.tests.conftest import acting_client, committed, fund, running
from teams.models import Membership, Role
from teams.services import team_create

pytestmark = pytest.mark.django_db


def _save_on_the_page(client, instance, name="my-env"):
    with committed():
        return client.post(
            reverse("instance_save_image", args=[instance.pk]), {"name": name, "tag": "v1", "note": "mine"}
        )


def test_the_instance_page_saves_it_and_the_images_page_lists_it(rich_alice, alice_client):
    instance = running(rich_alice)
    page = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert "Save as image" in page and "/home/user" in page  # what is kept, said where it is done
    response = _save_on_the_page(alice_client, instance)
    assert response.status_code == 302
    image = Image.objects.get(owner=rich_alice)
    assert image.status == Image.Status.READY
    listed = alice_client.get(reverse("images")).content.decode()
    assert "my-env:v1" in listed and 'data-image-status="ready"' in listed
    assert f"?image={image.slug}" in listed  # Launch from it
    detail = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert 'data-image-status="ready"' in detail


def test_launch_from_it_preselects_it_and_the_launch_pins_its_digest(rich_alice, alice_client):
    instance = running(rich_alice)
    _save_on_the_page(alice_client, instance)
    image = Image.objects.get(owner=rich_alice)
    page = alice_client.get(reverse("instance_launch") + f"?image={image.slug}").content.decode()
    assert f'value="{image.pk}" checked' in page
    body = {
        "region": instance.region_id,
        "gpu_model": instance.gpu_model_id,
        "gpu_count": 1,
        "node_count": 1,
        "image": image.pk,
        "disk_gb": 50,
        "tier": "on-demand",
    }
    with committed():
        response = alice_client.post(reverse("instance_launch"), body)
    assert response.status_code == 302, response.content.decode()[-2000:]
    launched = Instance.objects.exclude(pk=instance.pk).get(owner=rich_alice)
    assert launched.image == image and launched.image_ref == f"{image.repository}@{image.digest}"


def test_delete_on_the_page_is_refused_while_used_and_charlie_gets_404(rich_alice, alice_client, charlie_client):
    instance = running(rich_alice)
    _save_on_the_page(alice_client, instance)
    image = Image.objects.get(owner=rich_alice)
    assert charlie_client.post(reverse("image_change", args=[image.slug, "delete"])).status_code == 404
    assert image.slug not in charlie_client.get(reverse("images")).content.decode()
    Instance.objects.filter(pk=instance.pk).update(image=image)  # as one launched from it
    alice_client.post(reverse("image_change", args=[image.slug, "delete"]))
    image.refresh_from_db()
    assert image.status == Image.Status.READY
    page = alice_client.get(reverse("images")).content.decode()
    assert "release them first" in page


def test_a_team_member_sees_a_colleagues_image_once_it_is_shared(alice, catalogue, client):
    team = team_create(user=alice, name="Lab")
    fund(team.account, 1_000_000)
    mia = UserFactory(email="mia@example.com")
    Membership.objects.create(team=team, user=mia, role=Role.MEMBER)
    instance = running(team.account, actor=alice)

    _save_on_the_page(acting_client(client, alice, team), instance, name="team-env")
    image = Image.objects.get(owner=team.account)
    assert image.repository.endswith("/teams/lab/team-env")
    assert f'data-image="{image.slug}"' not in acting_client(client, mia, team).get(reverse("images")).content.decode()
    launch_page = client.get(reverse("instance_launch") + f"?image={image.slug}").content.decode()
    assert f'name="image" value="{image.pk}"' not in launch_page
    acting_client(client, alice, team).post(reverse("image_change", args=[image.slug, "share"]))
    listed = acting_client(client, mia, team).get(reverse("images")).content.decode()
    assert f'data-image="{image.slug}"' in listed and f"?image={image.slug}" in listed
    # She may launch from it, not change it.
    assert client.post(reverse("image_change", args=[image.slug, "delete"])).status_code == 403
    image.refresh_from_db()
    assert image.status == Image.Status.READY
