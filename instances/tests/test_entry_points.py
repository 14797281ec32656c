"""The instance page and API show how to reach a running instance: JupyterLab and VS Code through the
console's proxy and the SSH command, only what its backend offers; the proxy lets only the owner in."""

from __future__ import annotations

import json

from instances.catalogue import catalogue_seed
from instances.entry_points import instance_entry_points_refresh
from instances.models import GpuModel, Image, Instance, Region
from instances.proxy_targets import instance_proxy_target
from instances.services import instance_stop
from instances.tests.conftest import committed, running
from providers import get_backend
from providers.local.runtime.servers import Paths
from providers.local.tests.local_helpers import local_backends


def _servers_recorded(backend, key: str, services=("lab", "code", "ssh")) -> None:
    """What the runtime records for a started instance, without starting servers."""
    paths = Paths(backend.runtime.root / key)
    paths.run.mkdir(parents=True)
    meta = {"key": key, "owner_ref": "", "login_user": "console", "secrets": {"lab": "L", "code": "C"}}
    paths.meta.write_text(json.dumps(meta))
    backend.runtime.ports.allocate(key, list(services))


def test_the_simulated_cloud_offers_no_entry_points_and_says_so(rich_alice, alice_client):
    instance = running(rich_alice)
    body = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    assert "offers no JupyterLab, VS Code or SSH access" in body
    assert "Open JupyterLab" not in body and "/i/" not in body
    entry = alice_client.get(f"/api/v1/instances/{instance.pk}/").json()["entry_points"]
    assert entry == {"jupyterlab_url": None, "vscode_url": None, "ssh_command": None, "gateway_command": None}


def _local_instance(settings, tmp_path, user, services=("lab", "code", "ssh")):
    """A running instance on the local backend, without real servers: the row a finished launch leaves
    (with the entry points the worker saved) and what the runtime records for it."""
    settings.PROVISIONING_BACKENDS = local_backends(tmp_path, services=services, JUPYTER_BIN="/bin/true")
    catalogue_seed()
    backend = get_backend("local")
    instance = Instance.objects.create(
        owner=user,
        name="recorded",
        region=Region.objects.get(slug="local"),
        gpu_model=GpuModel.objects.get(slug="h200"),
        gpu_count=1,
        image=Image.objects.first(),
        disk_gb=50,
        backend_alias="local",
        hourly_price_fen=1490,
        status="running",
    )
    _servers_recorded(backend, instance.key, services)
    instance_entry_points_refresh(instance=instance)  # what the worker saves as the machine boots
    instance.refresh_from_db()
    return backend, instance


def test_a_running_local_instance_shows_its_entry_points(rich_alice, alice_client, settings, tmp_path):
    backend, instance = _local_instance(settings, tmp_path, rich_alice)
    ports = backend.runtime.ports.get(instance.key)
    body = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    assert f'href="/i/{instance.pk}/lab/"' in body and "Open JupyterLab" in body
    assert f'href="/i/{instance.pk}/code/"' in body and "Open VS Code" in body
    assert f'<code id="ssh-command">ssh -p {ports["ssh"]} console@testserver</code>' in body
    assert 'data-copy="#ssh-command"' in body
    settings.INSTANCES_SSH_HOST = "gpu.example.org"
    assert alice_client.get(f"/api/v1/instances/{instance.pk}/").json()["entry_points"] == {
        "jupyterlab_url": f"/i/{instance.pk}/lab/",
        "vscode_url": f"/i/{instance.pk}/code/",
        "ssh_command": f"ssh -p {ports['ssh']} console@gpu.example.org",
        "gateway_command": None,
    }


def test_a_backend_without_vs_code_shows_no_vs_code_button(rich_alice, alice_client, settings, tmp_path):
    _backend, instance = _local_instance(settings, tmp_path, rich_alice, services=("lab",))
    body = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    assert "Open JupyterLab" in body
    assert "Open VS Code" not in body and "ssh -p" not in body
    assert instance_proxy_target(instance_id=str(instance.pk), service="code", user=rich_alice) is None
    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=rich_alice) is not None


def test_only_the_owner_of_a_running_instance_gets_a_proxy_target(rich_alice, charlie, settings, tmp_path):
    backend, instance = _local_instance(settings, tmp_path, rich_alice)
    target = instance_proxy_target(instance_id=str(instance.pk), service="lab", user=rich_alice)
    assert target.port == backend.runtime.ports.get(instance.key)["lab"]
    assert dict(target.headers) == {"Authorization": "token L"}
    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=charlie) is None
    assert instance_proxy_target(instance_id=str(instance.pk), service="ssh", user=rich_alice) is None
    assert instance_proxy_target(instance_id="not-a-uuid", service="lab", user=rich_alice) is None
    with committed():
        instance_stop(instance=instance)
    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=rich_alice) is None
