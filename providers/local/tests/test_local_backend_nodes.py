"""The local backend reports this host's GPUs as its one node (simulated cards when it has none), in a
region of its own that the catalogue creates; the console places launches on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from instances.catalogue import catalogue_seed
from instances.models import Node, Region
from instances.services import nodes_sync
from providers import get_backend
from providers.local.backend import LocalBackend
from providers.local.tests.local_helpers import local_backends

RECORDINGS = Path(__file__).parent / "recordings"


def _nvidia_smi(tmp_path: Path, recording: str) -> str:
    """An nvidia-smi that prints a recorded answer."""
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat {RECORDINGS / recording}\n")
    script.chmod(0o755)
    return str(script)


def test_a_host_without_a_gpu_offers_its_configured_simulated_cards(tmp_path):
    backend = LocalBackend(
        alias="local",
        options={"ROOT": str(tmp_path), "NODE": "box", "REGION": "local", "SIMULATED_GPUS": 4,
                 "SIMULATED_GPU_NAME": "NVIDIA GeForce RTX 4090", "NVIDIA_SMI": "/nonexistent/nvidia-smi"},
    )  # fmt: skip
    [node] = backend.nodes()
    assert (node.name, node.region, node.gpu_model, node.cards) == ("box", "local", "rtx-4090", 4)


def test_the_hosts_real_cards_are_its_inventory(tmp_path):
    options = {"ROOT": str(tmp_path), "NODE": "box", "NVIDIA_SMI": _nvidia_smi(tmp_path, "nvidia-smi-8xH200.csv")}
    [node] = LocalBackend(alias="local", options=options).nodes()
    assert (node.gpu_model, node.cards) == ("h200", 8)


def test_a_host_missing_a_server_is_an_unhealthy_node(tmp_path):
    options = {
        "ROOT": str(tmp_path),
        "NVIDIA_SMI": "/nonexistent",
        "JUPYTER_BIN": "/nonexistent/jupyter",
        "ENGINE": "process",
    }
    [node] = LocalBackend(alias="local", options=options).nodes()
    assert node.healthy is False


def test_the_catalogue_creates_the_region_and_the_console_syncs_its_node(db, tmp_path):
    with override_settings(PROVISIONING_BACKENDS=local_backends(tmp_path, SIMULATED_GPUS=2, JUPYTER_BIN="/bin/true")):
        catalogue_seed()
        region = Region.objects.get(slug="local")
        assert (region.name, region.backend_alias) == ("This host", "local")
        assert nodes_sync(alias="local") == 1
    node = Node.objects.get(backend_alias="local")
    assert (node.name, node.region.slug, node.gpu_model.slug, node.total_cards, node.free_cards) == (
        "test-host",
        "local",
        "h200",
        2,
        2,
    )


@pytest.mark.parametrize("key", ["../evil", ""])
def test_a_bad_key_is_a_permanent_error(tmp_path, key):
    from providers import PermanentBackendError

    backend = LocalBackend(alias="local", options={"ROOT": str(tmp_path)})
    with pytest.raises(PermanentBackendError):
        backend.poll(key=key, state={})


def test_nothing_on_the_host_is_gone_and_destroying_it_again_is_done(tmp_path, settings):
    settings.PROVISIONING_BACKENDS = local_backends(tmp_path)
    backend = get_backend("local")
    assert backend.poll(key="never-made", state={}).state == "gone"
    backend.destroy(key="never-made", state={})
    backend.stop(key="never-made", state={})
    assert backend.machines() == []
