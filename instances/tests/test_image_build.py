"""The Dockerfile round trip through the API on the simulated cloud: a saved image has a recipe; alice edits
it and builds a new image (202, building, then ready and billed); a recipe that starts from an image she
may not use, or that reaches outside the build, is a 400 before anything runs; a failed build keeps its
log's tail and bills nothing; charlie gets a 404 on her image's recipe and log."""

from __future__ import annotations

import pytest
from django.urls import reverse

from billing.models import Meter
from instances.models import Image
from instances.services.images import image_meter_ref
from instances.tests.conftest import acting_client, committed, running, simulate

pytestmark = pytest.mark.django_db

REGISTRY = "registry.simulated.invalid"


@pytest.fixture(autouse=True)
def _registry(settings):
    settings.CONSOLE_REGISTRY = REGISTRY


@pytest.fixture
def saved(rich_alice, alice_client):
    instance = running(rich_alice)
    with committed():
        response = alice_client.post(
            reverse("api-instance-save-image", args=[instance.pk]),
            {"name": "my-env", "tag": "v1"},
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    image = Image.objects.get(slug=response.json()["id"])
    assert image.status == Image.Status.READY
    return image


def _build(client, recipe: str, name: str = "rebuilt", tag: str = "v1"):
    with committed():
        return client.post(
            reverse("api-image-build"), {"recipe": recipe, "name": name, "tag": tag}, content_type="application/json"
        )


def test_a_saved_image_has_a_recipe_as_text_and_a_stranger_gets_404(saved, alice_client, charlie_client):
    response = alice_client.get(reverse("api-image-recipe", args=[saved.slug]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert f"# Saved as: {saved.repository}@{saved.digest}" in response.content.decode()
    for name in ("api-image-recipe", "api-image-build-log"):
        assert charlie_client.get(reverse(name, args=[saved.slug])).status_code == 404


def test_an_edited_recipe_builds_a_new_image_that_is_billed_once_ready(saved, rich_alice, alice_client):
    recipe = f"# mine\nFROM {saved.pinned_ref}\nRUN echo hello > /etc/motd\nENV A=1\n"
    response = _build(alice_client, recipe)
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "building"
    image = Image.objects.get(slug=body["id"])
    assert image.status == Image.Status.READY and image.digest.startswith("sha256:")
    assert image.owner == rich_alice and image.repository == f"{REGISTRY}/users/u{rich_alice.pk}/rebuilt"
    assert image.contents["built_from"] == saved.slug
    meter = Meter.objects.get(ref=image_meter_ref(image.pk))
    assert meter.sku.code == "image.gb"
    # Its recipe is the one it was built from, and its log says what ran.
    assert alice_client.get(reverse("api-image-recipe", args=[image.slug])).content.decode() == recipe
    log = alice_client.get(reverse("api-image-build-log", args=[image.slug])).content.decode()
    assert "RUN echo hello > /etc/motd" in log
    got = alice_client.get(reverse("api-image-detail", args=[image.slug])).json()
    assert got["status"] == "ready" and got["reference"] == f"{image.repository}@{image.digest}"


@pytest.mark.parametrize(
    ("recipe", "says"),
    [
        ("FROM docker.io/library/debian:12\n", "not an image of this console's registry"),
        (f"FROM {REGISTRY}/users/u999999/theirs@sha256:{'0' * 64}\n", "not an image of this console's registry"),
        ("RUN true\n", "starts with FROM"),
        ("{base}\nADD https://example.com/x /x\n", "ADD is not accepted"),
        ("{base}\nRUN --mount=type=bind,source=/,target=/host cat /host/etc/shadow\n", "RUN takes no options"),
        ("{base}\nCOPY secrets.txt /x\n", "COPY needs --from"),
        ("{base}\nCOPY --from=docker.io/library/debian:12 /etc/passwd /x\n", "not an image of this console"),
        ("# escape=`\n{base}\n", "parser directives"),
        ("{base}\nFROM {ref}\n", "one FROM"),
        ("{base}\nONBUILD RUN rm -rf /\n", "ONBUILD is not accepted"),
    ],
)
def test_a_recipe_the_builder_must_not_run_is_a_400_before_anything_runs(saved, alice_client, recipe, says):
    recipe = recipe.format(base=f"FROM {saved.pinned_ref}", ref=saved.pinned_ref)
    before = Image.objects.count()
    response = _build(alice_client, recipe)
    assert response.status_code == 400, response.content
    assert says in str(response.json())
    assert Image.objects.count() == before


def test_another_accounts_saved_image_is_no_base(saved, charlie, charlie_client):
    from instances.tests.conftest import fund

    fund(charlie, 1_000_000)
    response = _build(charlie_client, f"FROM {saved.pinned_ref}\n")
    assert response.status_code == 400
    assert "not an image of this console's registry that you may use" in str(response.json())


def test_a_failed_build_keeps_its_log_and_bills_nothing(saved, alice_client):
    response = _build(alice_client, f"FROM {saved.pinned_ref}\nRUN echo one\nRUN false\n")
    assert response.status_code == 202
    image = Image.objects.get(slug=response.json()["id"])
    assert image.status == Image.Status.FAILED
    assert "RUN false" in image.status_reason
    assert "STEP 2/3: RUN echo one" in image.build_log
    assert not Meter.objects.filter(ref=image_meter_ref(image.pk)).exists()
    shown = alice_client.get(reverse("api-image-detail", args=[image.slug])).json()
    assert shown["status"] == "failed" and "RUN false" in shown["status_reason"]


def test_a_provider_failure_fails_the_build(saved, alice_client):
    with simulate(FAIL_IMAGE_BUILD=1):
        response = _build(alice_client, f"FROM {saved.pinned_ref}\n")
    image = Image.objects.get(slug=response.json()["id"])
    assert image.status == Image.Status.FAILED
    assert not Meter.objects.filter(ref=image_meter_ref(image.pk)).exists()


def test_the_same_name_and_tag_twice_is_a_409_and_a_build_in_progress_cannot_be_deleted(saved, alice_client):
    assert _build(alice_client, f"FROM {saved.pinned_ref}\n").status_code == 202
    again = _build(alice_client, f"FROM {saved.pinned_ref}\n")
    assert again.status_code == 409 and again.json()["error"]["code"] == "image_exists"
    response = alice_client.post(
        reverse("api-image-build"),
        {"recipe": f"FROM {saved.pinned_ref}\n", "name": "pending"},
        content_type="application/json",
    )  # not committed: the worker has not run, it is still building
    assert response.status_code == 202
    pending = response.json()["id"]
    deleted = alice_client.delete(reverse("api-image-detail", args=[pending]))
    assert deleted.status_code == 409 and deleted.json()["error"]["code"] == "invalid_state"


def test_without_a_registry_a_build_is_refused(saved, alice_client, settings):
    settings.CONSOLE_REGISTRY = ""
    response = _build(alice_client, f"FROM {saved.pinned_ref}\n")
    assert response.status_code == 409 and response.json()["error"]["code"] == "image_build_not_supported"


def test_a_team_member_builds_from_a_colleagues_image_only_once_it_is_shared(alice, catalogue, client):
    from accounts.tests.factories import UserFactory
    from instances.tests.conftest import fund
    from teams.models import Membership, Role
    from teams.services import team_create

    team = team_create(user=alice, name="Lab")
    fund(team.account, 1_000_000)
    mia = UserFactory(email="mia@example.com")
    Membership.objects.create(team=team, user=mia, role=Role.MEMBER)
    instance = running(team.account, actor=alice)

    with committed():
        acting_client(client, alice, team).post(
            reverse("instance_save_image", args=[instance.pk]), {"name": "team-env", "tag": "v1"}
        )
    image = Image.objects.get(owner=team.account)
    recipe = f"FROM {image.pinned_ref}\n"
    refused = _build(acting_client(client, mia, team), recipe, name="mine")
    assert refused.status_code == 400 and "that you may use" in str(refused.json())
    acting_client(client, alice, team).post(reverse("image_change", args=[image.slug, "share"]))
    built = _build(acting_client(client, mia, team), recipe, name="mine")
    assert built.status_code == 202, built.content
    made = Image.objects.get(slug=built.json()["id"])
    assert made.owner == team.account and made.created_by == mia and made.status == Image.Status.READY
    assert made.repository == f"{REGISTRY}/teams/lab/mine"
