"""Pages and the API read what the worker saved: listing or opening instances, deployments and volumes
asks no provider, whatever their number (on Kubernetes each question is an API call). The worker's
sync saves the entry points as the machine boots; the reconciler asks again when they are stale."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps_marketplace.loaders import marketplace_catalogue_load
from apps_marketplace.tests.conftest import deploy
from instances.catalogue import catalogue_seed
from instances.models import Instance
from instances.reconciler import instances_reconcile
from instances.services import instance_release, instance_restart, instance_stop
from instances.tests.conftest import SMALL_FLEET, committed, fund, launch, running
from instances.tests.provider_guard import (
    SSH_PORT,
    GuardedBackend,
    ProviderCalled,
    guarded_backends,
    provider_forbidden,
)
from providers import get_backend
from storage.models import Volume
from storage.tests.conftest import make_volume


@pytest.fixture
def guarded(settings, db):
    settings.PROVISIONING_BACKENDS = guarded_backends(SMALL_FLEET)
    settings.INSTANCES_REDRIVE_AFTER_S = 0
    catalogue_seed()
    marketplace_catalogue_load()


@pytest.fixture
def world(guarded, alice, staff):
    """Alice's instances in every kind of status, a deployment, a volume attached to a running instance."""
    fund(alice, 10_000_000)
    up = running(alice, name="up")
    stopped = running(alice, name="stopped")
    with committed():
        instance_stop(instance=stopped)
    released = running(alice, name="gone")
    with committed():
        instance_release(instance=released)
    booting = launch(alice, name="booting")  # its provision task never runs: still provisioning
    deployment, _key = deploy(alice)
    volume = make_volume(alice)
    from storage.services import volume_attach

    with committed():
        volume_attach(volume=volume, instance=up, mount_path="/mnt/data", user=alice)
    assert GuardedBackend.calls, "the worker asked the provider (the guard counts)"
    return {"up": up, "stopped": stopped, "released": released, "booting": booting, "deployment": deployment}


def _reads(world) -> list[str]:
    pages = ["/instances/", "/instances/?released=1", "/instances/launch/", "/quota/", "/dashboard/"]
    for instance in ("up", "stopped", "released", "booting"):
        pk = world[instance].pk
        pages += [f"/instances/{pk}/", f"/instances/{pk}/?partial=row", f"/instances/{pk}/?partial=body"]
        pages += [f"/api/v1/instances/{pk}/", f"/api/v1/instances/{pk}/events/"]
    pages += ["/api/v1/instances/", "/api/v1/instances/?released=1", "/api/v1/catalogue/", "/api/v1/quota/"]
    d = world["deployment"].pk
    pages += ["/apps/deployments/", f"/apps/deployments/{d}/", f"/apps/deployments/{d}/?partial=status"]
    pages += ["/api/v1/deployments/", f"/api/v1/deployments/{d}/", f"/api/v1/deployments/{d}/readiness/"]
    pages += ["/storage/", "/api/v1/volumes/"]
    for volume in Volume.objects.all():
        pages += [f"/storage/{volume.pk}/", f"/api/v1/volumes/{volume.pk}/"]
    return pages


def test_no_page_or_endpoint_asks_the_provider(world, alice_client):
    with provider_forbidden() as calls:
        for url in _reads(world):
            assert alice_client.get(url).status_code == 200, url
        assert alice_client.get("/instances/", HTTP_HX_REQUEST="true").status_code == 200
    assert calls == []


def test_staff_pages_ask_no_provider_either(world, client_for, staff):
    client = client_for(staff)
    pk = world["up"].pk
    with provider_forbidden() as calls:
        for url in (reverse("staff_fleet"), "/admin/instances/instance/", f"/admin/instances/instance/{pk}/change/"):
            assert client.get(url).status_code == 200, url
    assert calls == []


def test_the_pages_show_the_entry_points_saved_as_it_booted(world, alice_client):
    up = Instance.objects.get(pk=world["up"].pk)
    assert up.entry_points == {"web": ["lab", "code", "app", "webui"], "ssh_port": SSH_PORT, "ssh_user": "console"}
    assert up.entry_points_at == up.running_since
    expected = {
        "jupyterlab_url": f"/i/{up.pk}/lab/",
        "vscode_url": f"/i/{up.pk}/code/",
        "ssh_command": f"ssh -p {SSH_PORT} console@testserver",
        "gateway_command": None,
    }
    deployment = world["deployment"]
    with provider_forbidden():
        body = alice_client.get(f"/instances/{up.pk}/").content.decode()
        rows = {row["id"]: row for row in alice_client.get("/api/v1/instances/").json()["results"]}
        shown = alice_client.get(f"/api/v1/deployments/{deployment.pk}/").json()
    assert f'href="/i/{up.pk}/lab/"' in body and f"ssh -p {SSH_PORT} console@testserver" in body
    assert rows[str(up.pk)]["entry_points"] == expected
    assert shown["serving"] is True and shown["webui_url"] == f"/i/{deployment.instance_id}/webui/"
    # Only a running instance offers a way in.
    assert rows[str(world["stopped"].pk)]["entry_points"] == dict.fromkeys(expected)
    assert rows[str(world["booting"].pk)]["entry_points"] == dict.fromkeys(expected)


def test_entry_points_of_an_earlier_boot_are_not_shown_and_the_reconciler_asks_again(world, alice_client):
    up = world["up"]
    # The provider could not say as it booted again: what is saved is the earlier boot's.
    with committed():
        instance_restart(instance=Instance.objects.get(pk=up.pk))
    Instance.objects.filter(pk=up.pk).update(entry_points_at=None)
    with provider_forbidden():
        entry = alice_client.get(f"/api/v1/instances/{up.pk}/").json()["entry_points"]
    assert entry == {"jupyterlab_url": None, "vscode_url": None, "ssh_command": None, "gateway_command": None}
    instances_reconcile()
    with provider_forbidden():
        entry = alice_client.get(f"/api/v1/instances/{up.pk}/").json()["entry_points"]
    assert entry["jupyterlab_url"] == f"/i/{up.pk}/lab/"


def test_the_guard_refuses_while_armed(guarded):
    with provider_forbidden() as calls, pytest.raises(ProviderCalled):
        get_backend("default").poll(key="k", state={})
    assert calls == ["poll"]


def test_on_a_fresh_install_the_launch_page_has_a_worker_read_the_nodes(guarded, alice_client, monkeypatch):
    from instances import tasks
    from instances.models import Node

    asked = []
    monkeypatch.setattr(tasks.nodes_sync_task, "delay", asked.append)
    with provider_forbidden() as calls:
        assert alice_client.get("/instances/launch/").status_code == 200
        assert alice_client.get("/api/v1/catalogue/").status_code == 200
    assert calls == []
    assert asked == ["default"]  # once, however often the pages are loaded
    tasks.nodes_sync_task("default")
    assert Node.objects.filter(backend_alias="default").count() == 4
    body = alice_client.get("/instances/launch/").content.decode()
    assert asked == ["default"] and "A800" in body


def test_the_reconciler_asks_again_for_entry_points_grown_old(world, settings):
    from datetime import timedelta

    from django.utils import timezone

    up = world["up"]
    old = timezone.now() - timedelta(seconds=settings.INSTANCES_ENTRY_POINTS_REFRESH_S + 5)
    Instance.objects.filter(pk=up.pk).update(entry_points={}, entry_points_at=old, running_since=old)
    instances_reconcile()
    refreshed = Instance.objects.get(pk=up.pk)
    assert refreshed.entry_points["ssh_port"] == SSH_PORT and refreshed.entry_points_at > old
