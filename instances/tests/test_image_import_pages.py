"""Bring your own image on the pages: the Images page's form imports a good reference and says what it
found, and shows a bad one's refusal beside the form with the API's status; the Secrets page keeps the
logins to private registries (hosts and user names shown, never passwords), and another account's login
is a 404."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from instances.models import Image
from instances.tests import oci_images
from vault.models import RegistryCredential
from vault.services import registry_credential_set

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not oci_images.installed(), reason="needs docker-registry and skopeo"),
]


@pytest.fixture
def registry(tmp_path, settings):
    with oci_images.registry_running(tmp_path / "open") as server:
        settings.CONSOLE_REGISTRY = server.address
        settings.CONSOLE_REGISTRY_TLS_VERIFY = False
        settings.IMAGES_ALLOWED_REGISTRIES = []  # the console's own alone
        yield server


def test_the_images_page_offers_the_form_naming_the_allowed_registry(registry, alice_client):
    page = alice_client.get(reverse("images")).content.decode()
    assert "Bring your own image" in page and registry.address in page


def test_a_good_reference_is_imported_and_what_was_found_is_said(registry, tmp_path, alice_client):
    oci_images.push(registry, tmp_path / "img", "team/tools", "1.0")
    response = alice_client.post(reverse("image_import"), {"reference": f"{registry.address}/team/tools:1.0"})
    assert response.status_code == 302
    page = alice_client.get(reverse("images")).content.decode()
    assert "Imported tools:1.0" in page and "linux/amd64" in page and "start script" in page
    image = Image.objects.get()
    assert f'id="image-{image.slug}"' in page and f"{registry.address}/team/tools:1.0" in page


@pytest.mark.parametrize(
    ("reference", "status", "said"),
    [
        ("no such thing!", 400, "not an image reference"),
        ("registry.example.com/team/tools:1", 400, "can be imported only from"),
        ("{address}/team/missing:1", 404, "has no image"),
    ],
)
def test_a_bad_reference_is_refused_beside_the_form(registry, alice_client, reference, status, said):
    response = alice_client.post(reverse("image_import"), {"reference": reference.format(address=registry.address)})
    assert response.status_code == status
    assert said in response.content.decode()
    assert not Image.objects.exists()


def test_the_secrets_page_saves_and_deletes_a_registry_login(alice, alice_client):
    response = alice_client.post(
        reverse("registry_credential_add"), {"host": "registry.example.com:5000", "username": "ci", "password": "pw1"}
    )
    assert response.status_code == 302
    page = alice_client.get(reverse("secrets")).content.decode()
    assert "registry.example.com:5000" in page and "pw1" not in page
    credential = RegistryCredential.objects.get(owner=alice)
    bad = alice_client.post(reverse("registry_credential_add"), {"host": "no host", "username": "ci", "password": "x"})
    assert bad.status_code == 400 and 'value="x"' not in bad.content.decode()
    assert alice_client.post(reverse("registry_credential_delete", args=[credential.pk])).status_code == 302
    assert not RegistryCredential.objects.exists()


def test_charlie_cannot_delete_alices_login(alice, charlie_client):
    credential, _created = registry_credential_set(
        owner=alice, actor=alice, host="r.example.com", username="a", password="b"
    )
    assert charlie_client.post(reverse("registry_credential_delete", args=[credential.pk])).status_code == 404
    assert "r.example.com" not in charlie_client.get(reverse("secrets")).content.decode()
    assert RegistryCredential.objects.filter(pk=credential.pk).exists()


def test_the_sidebar_marks_images_alone_on_the_images_page(alice_client):
    page = alice_client.get(reverse("images")).content.decode()
    active = re.findall(r'<a class="active" href="([^"]+)"', page)
    assert active == [reverse("images")]
