"""Bring your own image on this host's containers (podman): an image off the image contract, in a
private registry (docker-registry with a log-in), is imported with the owner's saved login, pulled by its
pinned digest with that login (an auth file of mode 600, gone after the pull, never in the metadata or
the state), and runs JupyterLab all the same: the console mounts its start script and sets it as the
entrypoint. Slow (an image build, a push, a pull and a container boot): run on its own."""

from __future__ import annotations

import json

import pytest

from instances.models import GpuModel, Region
from instances.services import LaunchRequest, image_import, instance_launch
from instances.tests import oci_images
from instances.tests.conftest import committed
from providers.local.tests.local_helpers import wait_running
from providers.local.tests.test_local_containers import (  # noqa: F401  (fixtures)
    ALT,
    BOOT_S,
    container_images,
    in_containers,
)
from vault.services import registry_credential_set

pytestmark = [pytest.mark.local, pytest.mark.containers, pytest.mark.django_db(transaction=True)]


def test_a_private_image_off_the_contract_is_pulled_with_the_login_and_runs_jupyterlab(
    in_containers,  # noqa: F811
    rich_alice,
    tmp_path,
    settings,
):
    if not oci_images.installed():
        pytest.skip("needs docker-registry and skopeo")
    backend = in_containers(services=("lab",))
    podman = backend.runtime.podman
    context = tmp_path / "build"
    context.mkdir()
    (context / "Containerfile").write_text(f'FROM {ALT}\nLABEL org.gpu-console.contract="0"\n')
    podman.run("build", "--pull=never", "-t", "localhost/test/off-contract:1", str(context), timeout=300)
    with oci_images.registry_running(tmp_path / "private", username="ci", password="s3cret-live") as private:
        podman.run(
            "push", "--tls-verify=false", "--creds", "ci:s3cret-live",
            "localhost/test/off-contract:1", f"{private.address}/team/off:1", timeout=300,
        )  # fmt: skip
        settings.IMAGES_ALLOWED_REGISTRIES = [private.address]
        settings.IMAGES_INSECURE_REGISTRIES = [private.address]
        registry_credential_set(
            owner=rich_alice, actor=rich_alice, host=private.address, username="ci", password="s3cret-live"
        )
        image = image_import(owner=rich_alice, actor=rich_alice, reference=f"{private.address}/team/off:1")
        assert image.follows_contract is False and image.platform == "linux/amd64"

        with committed():
            instance = instance_launch(
                LaunchRequest(
                    user=rich_alice,
                    region=Region.objects.get(slug="local"),
                    gpu_model=GpuModel.objects.get(slug="h200"),
                    gpu_count=1,
                    image=image,
                    disk_gb=20,
                )
            )
        wait_running(instance, timeout=BOOT_S)  # JupyterLab answered

    runtime = backend.runtime
    meta = runtime.meta(instance.key)
    assert meta["image"] == image.pinned_ref == f"{private.address}/team/off@{image.digest}"
    config = runtime.podman.inspect("container", runtime.container_name(instance.key))
    assert "console-start" in json.dumps(config["Config"].get("Entrypoint")), config["Config"].get("Entrypoint")
    assert not (runtime.paths(instance.key).run / "pull-auth.json").exists()
    assert "s3cret-live" not in json.dumps(meta) and "s3cret-live" not in json.dumps(instance.backend_state)
