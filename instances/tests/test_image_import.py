"""Bring your own image, through the API against real registries (Debian's docker-registry, one open and
one with a log-in): a good reference becomes a READY image pinned to the registry's digest, with what was
found (size, platform, the contract); a bad reference, a registry not allowed, a missing image, a private
one without (or with a wrong) login, another architecture and a registry that does not answer are each a
clear 4xx (or a 503 with Retry-After) and record nothing. Charlie gets a 404 for alice's image and
credential whatever his credential."""

from __future__ import annotations

import httpx
import pytest
from django.test import Client
from django.urls import reverse

from accounts.services import api_token_create
from instances.models import Image, Instance
from instances.tests import oci_images
from instances.tests.conftest import committed
from providers.simulated.models import SimulatedMachine
from vault.models import RegistryCredential

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not oci_images.installed(), reason="needs docker-registry and skopeo"),
]

IMPORT = "api-image-import"


@pytest.fixture
def registries(tmp_path, settings):
    """An open registry (the console's own) and a private one, both allowed, both plain HTTP."""
    with oci_images.open_and_private_registries(tmp_path, settings, password="s3cret") as both:
        yield both


def _import(client, reference: str, **body):
    return client.post(reverse(IMPORT), {"reference": reference, **body}, content_type="application/json")


def _code(response) -> str:
    return response.json()["error"]["code"]


def test_a_good_reference_is_inspected_and_recorded_ready_and_pinned(registries, tmp_path, alice, alice_client):
    open_registry, _private = registries
    digest = oci_images.push(open_registry, tmp_path / "img", "team/tools", "1.0")

    response = _import(alice_client, f"{open_registry.address}/team/tools:1.0")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "ready" and body["name"] == "tools" and body["tag"] == "1.0"
    assert body["digest"] == digest and body["reference"] == f"{open_registry.address}/team/tools@{digest}"
    assert body["platform"] == "linux/amd64" and body["follows_contract"] is False and body["billed_gb"] == 0
    assert body["size_bytes"] > 0 and body["imported_from"] == f"{open_registry.address}/team/tools:1.0"
    image = Image.objects.get(slug=body["id"])
    assert image.owner == alice and image.created_by == alice and not image.is_active
    listed = alice_client.get(reverse("api-image-list")).json()
    assert [row["id"] for row in listed["results"]] == [image.slug]


def test_the_contract_label_is_read_from_the_config(registries, tmp_path, alice_client):
    open_registry, _private = registries
    oci_images.push(open_registry, tmp_path / "img", "contract", "2", labels={"org.gpu-console.contract": "1"})
    response = _import(alice_client, f"{open_registry.address}/contract:2", name="mine", tag="v2")
    assert response.status_code == 201, response.content
    assert response.json()["follows_contract"] is True
    assert (response.json()["name"], response.json()["tag"]) == ("mine", "v2")


def test_a_launch_from_an_imported_image_pins_its_digest(registries, tmp_path, rich_alice, alice_client):
    open_registry, _private = registries
    digest = oci_images.push(open_registry, tmp_path / "img", "team/tools", "1.0")
    image = Image.objects.get(slug=_import(alice_client, f"{open_registry.address}/team/tools:1.0").json()["id"])
    body = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "disk_gb": 50, "image": image.slug}
    with committed():
        response = alice_client.post(reverse("api-instance-list"), body, content_type="application/json")
    assert response.status_code == 201, response.content
    launched = Instance.objects.get(pk=response.json()["id"])
    assert launched.image == image and launched.image_ref == f"{open_registry.address}/team/tools@{digest}"
    assert SimulatedMachine.objects.get(key=str(launched.pk)).spec["image_ref"] == launched.image_ref


@pytest.mark.parametrize(
    "reference",
    ["", "not a reference", "UPPER/Case:1", "host:5000/x:tag with space", "x@sha256:1234", "a" * 300],
)
def test_what_is_not_a_reference_is_a_400_naming_the_field(registries, alice_client, reference):
    response = _import(alice_client, reference)
    assert response.status_code == 400, response.content
    assert "reference" in response.json()["error"]["fields"]
    assert not Image.objects.exists()


def test_a_registry_not_allowed_is_a_400_naming_those_allowed(registries, alice_client):
    open_registry, private = registries
    response = _import(alice_client, "registry.example.com/team/tools:1.0")
    assert response.status_code == 400 and _code(response) == "registry_not_allowed"
    assert open_registry.address in response.json()["error"]["message"]
    assert private.address in response.json()["error"]["message"]
    assert _code(_import(alice_client, "python:3.11")) == "registry_not_allowed"  # Docker Hub's, not allowed
    assert not Image.objects.exists()


def test_an_image_not_there_is_a_404(registries, tmp_path, alice_client):
    open_registry, _private = registries
    oci_images.push(open_registry, tmp_path / "img", "team/tools", "1.0")
    for reference in ("team/tools:2.0", "team/nothing:1.0", "team/tools@sha256:" + "0" * 64):
        response = _import(alice_client, f"{open_registry.address}/{reference}")
        assert response.status_code == 404 and _code(response) == "image_not_found", reference
    assert not Image.objects.exists()


def test_a_private_image_needs_the_accounts_login_for_its_registry(registries, tmp_path, alice, alice_client):
    _open, private = registries
    digest = oci_images.push(private, tmp_path / "img", "secret/model", "1")
    reference = f"{private.address}/secret/model:1"

    response = _import(alice_client, reference)
    assert response.status_code == 403 and _code(response) == "registry_auth_required"
    assert "Registry credentials" in response.json()["error"]["message"]

    saved = alice_client.post(
        reverse("api-registry-credential-list"),
        {"host": private.address, "username": "ci", "password": "wrong"},
        content_type="application/json",
    )
    assert saved.status_code == 201, saved.content
    assert "password" not in saved.json() and "wrong" not in saved.content.decode()
    response = _import(alice_client, reference)
    assert response.status_code == 403 and _code(response) == "registry_auth_failed"
    assert not Image.objects.exists()

    credential = RegistryCredential.objects.get(owner=alice)
    assert "s3cret" not in credential.ciphertext and "wrong" not in credential.ciphertext
    replaced = alice_client.put(
        reverse("api-registry-credential-detail", args=[credential.pk]),
        {"username": "ci", "password": "s3cret"},
        content_type="application/json",
    )
    assert replaced.status_code == 200, replaced.content
    response = _import(alice_client, reference)
    assert response.status_code == 201, response.content
    assert response.json()["digest"] == digest


def test_another_architecture_is_refused_with_what_it_is_built_for(registries, tmp_path, alice_client):
    open_registry, _private = registries
    oci_images.push(open_registry, tmp_path / "img", "arm/tools", "1", architecture="arm64")
    response = _import(alice_client, f"{open_registry.address}/arm/tools:1")
    assert response.status_code == 422 and _code(response) == "image_wrong_architecture"
    assert "linux/arm64" in response.json()["error"]["message"]
    assert "linux/amd64" in response.json()["error"]["message"]
    assert not Image.objects.exists()


def test_a_registry_that_does_not_answer_is_a_503_with_retry_after(registries, settings, alice_client):
    silent = f"127.0.0.1:{oci_images.free_port()}"
    settings.IMAGES_ALLOWED_REGISTRIES = [*settings.IMAGES_ALLOWED_REGISTRIES, silent]
    settings.IMAGES_INSECURE_REGISTRIES = [silent]
    response = _import(alice_client, f"{silent}/team/tools:1")
    assert response.status_code == 503 and _code(response) == "registry_unavailable"
    assert int(response.headers["Retry-After"]) > 0
    assert not Image.objects.exists()


def test_the_same_name_and_tag_twice_is_a_409(registries, tmp_path, alice_client):
    open_registry, _private = registries
    oci_images.push(open_registry, tmp_path / "img", "team/tools", "1.0")
    assert _import(alice_client, f"{open_registry.address}/team/tools:1.0").status_code == 201
    response = _import(alice_client, f"{open_registry.address}/team/tools:1.0")
    assert response.status_code == 409 and _code(response) == "image_exists"


def test_deleting_an_imported_image_leaves_the_owners_registry_alone(registries, tmp_path, alice_client):
    open_registry, _private = registries
    oci_images.push(open_registry, tmp_path / "img", "team/tools", "1.0")
    slug = _import(alice_client, f"{open_registry.address}/team/tools:1.0").json()["id"]
    with committed():
        assert alice_client.delete(reverse("api-image-detail", args=[slug])).status_code == 204
    served = httpx.head(
        f"http://{open_registry.address}/v2/team/tools/manifests/1.0",
        headers={"Accept": oci_images.MANIFEST},
    )
    assert served.status_code == 200


def test_charlie_gets_404_on_alices_image_and_credential_whatever_his_credential(
    registries, tmp_path, alice_client, charlie, charlie_client
):
    open_registry, private = registries
    oci_images.push(open_registry, tmp_path / "img", "team/tools", "1.0")
    slug = _import(alice_client, f"{open_registry.address}/team/tools:1.0").json()["id"]
    credential = alice_client.post(
        reverse("api-registry-credential-list"),
        {"host": private.address, "username": "ci", "password": "s3cret"},
        content_type="application/json",
    ).json()["id"]
    _token, raw = api_token_create(user=charlie, name="charlie", expires_at=None)
    for client in (charlie_client, Client(HTTP_AUTHORIZATION=f"Bearer {raw}")):
        assert client.get(reverse("api-image-detail", args=[slug])).status_code == 404
        assert client.delete(reverse("api-image-detail", args=[slug])).status_code == 404
        detail = reverse("api-registry-credential-detail", args=[credential])
        assert client.get(detail).status_code == 404
        assert client.delete(detail).status_code == 404
        put = client.put(detail, {"username": "x", "password": "y"}, content_type="application/json")
        assert put.status_code == 404
        assert client.get(reverse("api-registry-credential-list")).json()["results"] == []
        assert client.get(reverse("api-image-list")).json()["results"] == []
    assert RegistryCredential.objects.count() == 1 and Image.objects.filter(slug=slug, status="ready").exists()


def test_a_credential_list_shows_host_and_user_never_the_password(registries, alice_client):
    _open, private = registries
    alice_client.post(
        reverse("api-registry-credential-list"),
        {"host": private.address, "username": "ci", "password": "s3cret"},
        content_type="application/json",
    )
    listed = alice_client.get(reverse("api-registry-credential-list"))
    assert [(r["host"], r["username"]) for r in listed.json()["results"]] == [(private.address, "ci")]
    assert "s3cret" not in listed.content.decode()
    again = alice_client.post(
        reverse("api-registry-credential-list"),
        {"host": private.address, "username": "ci", "password": "other"},
        content_type="application/json",
    )
    assert again.status_code == 409 and _code(again) == "credential_exists"
    bad = alice_client.post(
        reverse("api-registry-credential-list"),
        {"host": "not a host", "username": "ci", "password": "x"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "host" in bad.json()["error"]["fields"]


def test_a_team_token_imports_into_the_team_with_the_teams_login_only(registries, tmp_path, alice, bob, catalogue):
    from rest_framework.test import APIClient

    from teams.tests.helpers import lab_with_roles

    _open, private = registries
    oci_images.push(private, tmp_path / "img", "secret/model", "1")
    team = lab_with_roles(alice, bob)
    clients = {}
    for name, scope in (("personal", {}), ("team", {"team_id": team.pk})):
        _token, raw = api_token_create(user=alice, name=name, expires_at=None, **scope)
        clients[name] = APIClient()
        clients[name].credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    login = {"host": private.address, "username": "ci", "password": "s3cret"}
    saved = clients["personal"].post(reverse("api-registry-credential-list"), login, format="json")
    assert saved.status_code == 201
    # Alice's own login is not the team's: the team has none yet.
    refused = _import(clients["team"], f"{private.address}/secret/model:1")
    assert refused.status_code == 403 and _code(refused) == "registry_auth_required"
    assert clients["team"].get(reverse("api-registry-credential-list")).json()["results"] == []
    detail = reverse("api-registry-credential-detail", args=[saved.json()["id"]])
    assert clients["team"].get(detail).status_code == 404
    assert clients["team"].post(reverse("api-registry-credential-list"), login, format="json").status_code == 201
    imported = _import(clients["team"], f"{private.address}/secret/model:1")
    assert imported.status_code == 201, imported.content
    assert Image.objects.get(slug=imported.json()["id"]).owner == team.account
    assert clients["personal"].get(reverse("api-image-list")).json()["results"] == []
