"""Fixtures for the instances app: a small simulated fleet, the catalogue, money, a launch helper."""

from __future__ import annotations

import pytest
from django.test import override_settings

from billing.models import LedgerAccount, Transaction
from billing.services import account_get, ledger_post
from console.hooks import proxy_target
from instances.catalogue import catalogue_seed
from instances.models import GpuModel, Image, Instance, Region
from instances.proxy_targets import instance_proxy_target

# The Slurm provider's fixtures live with its tests (providers/slurm/tests/cluster_fixtures.py); named here too,
# for the tests of other apps that still take them from this module.
from providers.slurm.tests.cluster_fixtures import on_slurm, slurm_cluster, slurm_tmp_path  # noqa: F401 (fixtures)

# Two 8-card A800 nodes and one 8-card H800 node in cn-north-1; one A800 node in cn-east-1.
SMALL_FLEET = [
    {"region": "cn-north-1", "gpu": "a800-80g", "nodes": 2, "cards": 8},
    {"region": "cn-north-1", "gpu": "h800", "nodes": 1, "cards": 8},
    {"region": "cn-east-1", "gpu": "a800-80g", "nodes": 1, "cards": 8},
]


def backends(**options) -> dict:
    """A PROVISIONING_BACKENDS value: the simulated cloud with the small fleet and ``options``."""
    return {
        "default": {
            "BACKEND": "providers.simulated.backend.SimulatedBackend",
            "OPTIONS": {"FLEET": SMALL_FLEET, "BOOT_DELAY_S": 0, **options},
        }
    }


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.PROVISIONING_BACKENDS = backends()
    settings.INSTANCES_REDRIVE_AFTER_S = 0


def simulate(**options):
    """``with simulate(FAIL_CREATE_PERMANENT=1):`` — the simulated cloud misbehaving for a block."""
    return override_settings(PROVISIONING_BACKENDS=backends(**options))


@pytest.fixture
def catalogue(db):
    catalogue_seed()


def fund(user, fen: int) -> None:
    """Top up ``user`` with ``fen`` of paid money (as a payment would)."""
    ledger_post(
        key=f"test:topup:{user.pk}:{Transaction.objects.count()}",
        kind=Transaction.Kind.TOPUP,
        user=user,
        legs=[(account_get(kind=LedgerAccount.Kind.GATEWAY), -fen), (account_get(user=user, kind="cash"), fen)],
    )


@pytest.fixture
def rich_alice(alice, catalogue):
    fund(alice, 1_000_000)
    return alice


def launch(
    user,
    *,
    gpu="a800-80g",
    count=1,
    region="cn-north-1",
    disk_gb=50,
    image="pytorch-2.5-cu124",
    name="",
    ssh_keys=(),
    nodes=1,
    tier=Instance.Tier.ON_DEMAND,
    checkpoint="",
    volumes=(),
    actor=None,
):
    """The one way the tests launch: ``instance_launch`` with the small fleet's defaults, the catalogue
    named by slug. ``user`` is the account that pays (a team's ``account`` with ``actor`` its member)."""
    from instances.services import LaunchRequest, instance_launch

    return instance_launch(
        LaunchRequest(
            user=user,
            actor=actor,
            region=Region.objects.get(slug=region),
            gpu_model=GpuModel.objects.get(slug=gpu),
            gpu_count=count,
            image=Image.objects.get(slug=image),
            disk_gb=disk_gb,
            name=name,
            ssh_keys=ssh_keys,
            node_count=nodes,
            tier=tier,
            checkpoint_command=checkpoint,
            volumes=volumes,
        )
    )


def statuses(instance: Instance) -> list[tuple[str, str]]:
    return list(instance.events.order_by("created_at", "id").values_list("old", "new"))


def committed():
    """Run the on-commit callbacks (tasks, eagerly) of the block, as a real commit would."""
    from django.test import TestCase

    return TestCase.captureOnCommitCallbacks(execute=True)


def running(user, **kwargs) -> Instance:
    """Launch and let the (eager) worker bring it up."""
    with committed():
        instance = launch(user, **kwargs)
    instance.refresh_from_db()
    return instance


@pytest.fixture
def this_host(settings, tmp_path, db, hooks_override):
    """``this_host(services=("lab",))``: the local backend (region "local", two simulated H200s) with a
    runtime in a temporary root, the catalogue seeded with its region; skips when a server is not
    installed. Every instance it made is destroyed afterwards. Returns the backend."""
    from providers import get_backend
    from providers.local.tests.local_helpers import local_backends

    made = []

    def make(*, services=("lab",), **options):
        settings.PROVISIONING_BACKENDS = local_backends(tmp_path / "instances", services=services, **options)
        # The console's resolver, whatever a session-wide fixture (console/tests' proxy_world) set.
        hooks_override(proxy_target, instance_proxy_target)
        backend = get_backend("local")
        missing = backend.runtime.missing_components()
        if missing:
            pytest.skip("; ".join(missing.values()))
        catalogue_seed()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        for key in backend.runtime.instance_keys():
            backend.runtime.destroy(key)


def acting_client(client, user, team):
    """``client`` signed in as ``user`` and acting in ``team`` (the session's team context)."""
    from teams.context import SESSION_KEY

    client.force_login(user)
    session = client.session
    session[SESSION_KEY] = team.pk
    session.save()
    return client
