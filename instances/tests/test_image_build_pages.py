"""The Dockerfile round trip on the pages: the Images page links each image's recipe; the recipe page shows
it read-only and downloads it as ``Containerfile``; its Build form builds an edited recipe into a new image
whose page shows it Ready with its log; a refused recipe comes back with the form and why; charlie gets 404."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from instances.models import Image
from instances.tests.conftest import committed, running

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _registry(settings):
    settings.CONSOLE_REGISTRY = "registry.simulated.invalid"


@pytest.fixture
def saved(rich_alice, alice_client):
    instance = running(rich_alice)
    with committed():
        alice_client.post(reverse("instance_save_image", args=[instance.pk]), {"name": "my-env", "tag": "v1"})
    return Image.objects.get(owner=rich_alice, name="my-env")


def test_the_recipe_is_linked_shown_and_downloaded(saved, alice_client, charlie_client):
    listed = alice_client.get(reverse("images")).content.decode()
    assert reverse("image_recipe", args=[saved.slug]) in listed
    page = alice_client.get(reverse("image_recipe", args=[saved.slug]))
    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    assert saved.recipe.strip() in text  # the read-only view, and the form's textarea
    assert 'value="v2"' in page.content.decode()  # the next tag is offered
    download = alice_client.get(reverse("image_recipe", args=[saved.slug]) + "?download=1")
    assert download["Content-Disposition"] == 'attachment; filename="Containerfile"'
    assert download.content.decode() == saved.recipe
    assert charlie_client.get(reverse("image_recipe", args=[saved.slug])).status_code == 404
    assert charlie_client.post(reverse("image_build", args=[saved.slug]), {"recipe": "x"}).status_code == 404


def test_the_build_form_builds_a_new_image_and_its_page_shows_it_ready(saved, alice_client):
    recipe = f"FROM {saved.pinned_ref}\nRUN echo hi > /etc/motd\n"
    with committed():
        response = alice_client.post(
            reverse("image_build", args=[saved.slug]), {"recipe": recipe, "name": "my-env", "tag": "v2"}
        )
    assert response.status_code == 302
    built = Image.objects.get(name="my-env", tag="v2")
    assert response["Location"] == reverse("image_recipe", args=[built.slug])
    page = alice_client.get(response["Location"]).content.decode()
    assert 'data-image-status="ready"' in page and "RUN echo hi &gt; /etc/motd" in page
    assert "data-build-log" in page


def test_a_refused_recipe_comes_back_with_the_form_and_why(saved, alice_client):
    response = alice_client.post(
        reverse("image_build", args=[saved.slug]),
        {"recipe": "FROM docker.io/library/debian:12\n", "name": "other", "tag": "v1"},
    )
    assert response.status_code == 400
    assert "not an image of this console&#x27;s registry" in response.content.decode()
    assert not Image.objects.filter(name="other").exists()
