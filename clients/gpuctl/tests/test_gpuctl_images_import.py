"""gpuctl images import and gpuctl registries against a live console and a private registry (Debian's
docker-registry with a log-in): without a login the import is refused with its code and exit status;
after `registries login` (password from standard input) it imports, saying what it found; the SDK
covers each operation (list, get, update, delete of a login)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from gpuctl.cli import cli

from instances.tests import oci_images

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not oci_images.installed(), reason="needs docker-registry and skopeo"),
]


@pytest.fixture
def private(tmp_path, settings):
    with oci_images.registry_running(tmp_path / "private", username="ci", password="s3cret") as server:
        settings.IMAGES_ALLOWED_REGISTRIES = [server.address]
        settings.IMAGES_INSECURE_REGISTRIES = [server.address]
        settings.IMAGES_IMPORT_TIMEOUT_S = 5
        yield server


def test_import_needs_a_login_then_says_what_it_found(console, gpuctl, private, tmp_path):
    oci_images.push(private, tmp_path / "img", "team/tools", "1.0")
    reference = f"{private.address}/team/tools:1.0"
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0

    refused = gpuctl("--json", "images", "import", reference)
    assert refused.code != 0 and "registry_auth_required" in refused.stdout + refused.stderr

    result = CliRunner().invoke(
        cli, ["--json", "registries", "login", private.address, "--username", "ci"], input="s3cret\n"
    )
    assert result.exit_code == 0, result.stderr
    listed = gpuctl("--json", "registries", "list").json()
    assert [(r["host"], r["username"]) for r in listed] == [(private.address, "ci")]
    assert "s3cret" not in json.dumps(listed)

    imported = gpuctl("images", "import", reference, "--name", "tools")
    assert imported.code == 0, imported.stderr
    assert "tools:1.0" in imported.stdout and "linux/amd64" in imported.stdout
    assert "start script" in imported.stdout
    assert [row["name"] for row in gpuctl("--json", "images", "list").json()] == ["tools"]

    from gpuctl import Client

    client = Client(console["url"], console["token"])
    credential = client.registry_credentials_get(listed[0]["id"])
    assert credential["host"] == private.address
    assert client.registry_credentials_update(credential["id"], {"username": "ci", "password": "x"})["username"] == "ci"
    assert gpuctl("--json", "registries", "delete", private.address).code == 0
    assert list(client.registry_credentials_list()) == []
