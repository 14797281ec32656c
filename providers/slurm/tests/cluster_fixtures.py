"""The Slurm provider's fixtures: the test cluster (``make slurm``), a directory its tenants' jobs can
pass through, and ``on_slurm``, the backend on it. Declared here, not in a conftest, so that the
tests of other apps that run on the cluster (the gateway's, the marketplace's) import the same ones."""

from __future__ import annotations

import pytest

from console.hooks import proxy_target
from instances.catalogue import catalogue_seed
from instances.proxy_targets import instance_proxy_target


@pytest.fixture(scope="session")
def slurm_cluster():
    """The real Slurm cluster on this host (``make slurm``), or a skip that says how to start it."""
    from providers.slurm.tests.slurm_helpers import cluster_or_skip

    return cluster_or_skip()


@pytest.fixture
def slurm_tmp_path(request):
    """A temporary directory the Slurm tenants' jobs can pass through (``tmp_path`` is 0700)."""
    from providers.slurm.tests.slurm_helpers import scratch

    return scratch(request)


@pytest.fixture
def on_slurm(settings, tmp_path, slurm_tmp_path, db, slurm_cluster, hooks_override):
    """``on_slurm(rest=False, services=("lab",), **options)``: the Slurm backend (region "slurm-local")
    on the test cluster with instance directories in a temporary root, the catalogue seeded with its
    region. Skips when a server it should start is not installed. Every job of the test is cancelled
    afterwards. Returns the backend."""
    from providers import get_backend
    from providers.local.runtime.supervisor import LocalRuntime
    from providers.slurm.tests.slurm_helpers import slurm_backends

    def make(*, rest: bool = False, services=("lab",), **options):
        missing = LocalRuntime(root=tmp_path, services=services).missing_components()
        if missing:
            pytest.skip("; ".join(missing.values()))
        settings.PROVISIONING_BACKENDS = slurm_backends(
            slurm_tmp_path / "instances", rest=rest, services=services, **options
        )
        hooks_override(proxy_target, instance_proxy_target)
        catalogue_seed()
        return get_backend("slurm")

    yield make
    slurm_cluster.cancel_test_jobs()
