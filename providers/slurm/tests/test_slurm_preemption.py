"""Slurm preempts and requeues by itself, for real on the test cluster (``make slurm``: partitions
``gpu`` (PriorityTier=2) and ``spot`` (PriorityTier=1, PreemptMode=REQUEUE, GraceTime) over the same
three nodes). Interruptible machines are requeueable jobs in ``spot``; an on-demand one that finds the
cluster full takes the cards of one of them: that job gets SIGTERM, runs its owner's checkpoint
command, is requeued with the same job id, and runs again, on the same directory, once the on-demand
machine is gone. Through the console the instance is PREEMPTED (billing stopped) and then RUNNING
again with the same identity, billed from the second it runs."""

from __future__ import annotations

import pytest
from django.utils import timezone

from billing.models import Meter
from instances.models import GpuModel, Image, Instance, Region
from instances.reconciler import instances_reconcile
from instances.services import LaunchRequest, instance_launch, instance_release, instance_sync
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed
from providers import InstanceSpec, Observed, get_backend
from providers.local.tests.local_helpers import wait_running, wait_until
from providers.slurm.tests.slurm_helpers import NODES, PREFIX, tenant

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

S = Instance.Status
CHECKPOINT = 'echo "saved at restart ${SLURM_RESTART_COUNT:-0} on $(hostname)" >> checkpoint.txt'


def _spec(**kwargs) -> InstanceSpec:
    return InstanceSpec(
        node="", gpu_model="h200", image="cuda", disk_gb=20, **{"gpu_count": 8, "tenant": tenant(9001), **kwargs}
    )


def _poll_until(backend, key: str, state: dict, wanted: Observed, *, timeout: float) -> dict:
    """Poll machine ``key`` until it is ``wanted``; returns the state polling taught (as the console keeps it)."""
    seen = {"state": state}

    def check() -> bool:
        observation = backend.poll(key=key, state=seen["state"])
        if observation.backend_state is not None:
            seen["state"] = observation.backend_state
        seen["last"] = observation
        return observation.state == wanted

    wait_until(check, timeout=timeout, interval=0.25, what=f"{key} to be {wanted} (last: {seen.get('last')})")
    return seen["state"]


def test_on_demand_preempts_one_spot_job_which_checkpoints_requeues_and_runs_again(on_slurm, slurm_cluster):
    backend = on_slurm(services=())
    spots = {}
    for n in range(3):  # 3 nodes x 8 cards: the cluster is full of interruptible machines
        key = f"spot-{n}"
        spots[key] = backend.create(key=key, spec=_spec(interruptible=True, checkpoint_command=CHECKPOINT))
    for key in spots:
        spots[key] = _poll_until(backend, key, spots[key], Observed.RUNNING, timeout=60)
        job = slurm_cluster.job(spots[key]["job_id"])
        assert job["partition"] == "spot" and job["requeue"] is True
    assert {m.key: m.observed for m in backend.machines()} == dict.fromkeys(spots, Observed.RUNNING)

    on_demand = backend.create(key="od", spec=_spec())
    assert slurm_cluster.job(on_demand["job_id"])["partition"] == "gpu"
    assert slurm_cluster.job(on_demand["job_id"])["requeue"] is False
    on_demand = _poll_until(backend, "od", on_demand, Observed.RUNNING, timeout=60)

    # Exactly one interruptible machine gave its node up: preempted (requeued, same job id, waiting).
    observed = {key: backend.poll(key=key, state=state).state for key, state in spots.items()}
    victims = [key for key, seen in observed.items() if seen == Observed.PREEMPTED]
    assert len(victims) == 1, observed
    victim = victims[0]
    assert sorted(observed.values()) == sorted([Observed.PREEMPTED, Observed.RUNNING, Observed.RUNNING])
    job = slurm_cluster.job(spots[victim]["job_id"])
    assert job["job_state"] == "PENDING" and job["restart_cnt"] == 1
    assert {m.key: m.observed for m in backend.machines()}[victim] == Observed.PREEMPTED
    # Its checkpoint command ran in its own home (its disk), in the run that was preempted; the others' did not.
    home = backend.root / victim / "home"
    assert (home / "checkpoint.txt").read_text().startswith("saved at restart 0 on ")
    assert not any((backend.root / key / "home" / "checkpoint.txt").exists() for key in spots if key != victim)

    backend.destroy(key="od", state=on_demand)
    state = _poll_until(backend, victim, spots[victim], Observed.RUNNING, timeout=60)
    assert state["job_id"] == spots[victim]["job_id"] and state["restarts"] == 1  # the same job, its second run
    assert (home / "checkpoint.txt").exists()  # the same disk


def test_the_console_shows_slurms_preemption_and_bills_only_the_running_time(on_slurm, slurm_cluster, rich_alice):
    """Someone else's on-demand job takes the node: the console's instance is PREEMPTED (its GPU meter
    closed) while Slurm holds it in the queue, then RUNNING again with the same job and key, a new meter."""
    on_slurm(services=())
    with committed():
        instance = instance_launch(
            LaunchRequest(
                user=rich_alice,
                region=Region.objects.get(slug="slurm-local"),
                gpu_model=GpuModel.objects.get(slug="h200"),
                gpu_count=8,
                image=Image.objects.get(slug="pytorch-2.5-cu124"),
                disk_gb=20,
                name="spot",
                tier=Instance.Tier.INTERRUPTIBLE,
                checkpoint_command=CHECKPOINT,
            )
        )
    wait_running(instance, timeout=60)
    instance.refresh_from_db()
    job_id, node = instance.backend_state["job_id"], instance.backend_state["node"]
    assert slurm_cluster.job(job_id)["partition"] == "spot"

    # On-demand work outside the console on every node (the instance's first): Slurm preempts its job,
    # which then waits in the queue.
    others = [
        slurm_cluster.sbatch(
            "--partition=gpu", "--gres=gpu:h200:8", f"--nodelist={name}", "--wrap=sleep 600", name=f"on-demand-{name}"
        )
        for name in [node, *sorted(set(NODES) - {node})]
    ]

    def status_is(wanted: str) -> bool:
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        return instance.status == wanted

    wait_until(lambda: status_is(S.PREEMPTED), timeout=60, interval=0.25, what="the instance to be preempted")
    preempted_at = timezone.now()
    first = Meter.objects.get(ref=gpu_meter_ref(instance.pk))
    assert first.stopped_at is not None and first.stopped_at <= preempted_at  # billing stopped at preemption
    assert instance.node is None  # its cards went back
    assert "Slurm" in instance.status_reason

    # Its grace period (the checkpoint), then back in Slurm's queue; the console does not start it itself.
    wait_until(lambda: slurm_cluster.job(job_id)["job_state"] == "PENDING", timeout=30, what="the requeue")
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.PREEMPTED
    slurm_cluster.run("scancel", *map(str, others))
    wait_until(lambda: status_is(S.RUNNING), timeout=60, interval=0.25, what="the instance to run again")
    assert instance.backend_state["job_id"] == job_id and instance.backend_state["restarts"] == 1
    assert instance.node is not None and instance.node.name == instance.backend_state["node"]
    meters = list(Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).order_by("started_at"))
    assert len(meters) == 2 and meters[1].stopped_at is None and meters[1].started_at >= preempted_at
    assert [new for _old, new in instance.events.order_by("created_at", "id").values_list("old", "new")][-3:] == [
        S.PREEMPTED,
        S.STARTING,
        S.RUNNING,
    ]
    home = get_backend(instance.backend_alias).root / instance.key / "home"
    assert (home / "checkpoint.txt").read_text().startswith("saved at restart 0")

    with committed():
        instance_release(instance=instance)
    wait_until(lambda: status_is(S.RELEASED), timeout=30, interval=0.25, what="the release")
    assert slurm_cluster.active(f"{PREFIX}{instance.key}") == []


def test_the_console_fills_the_cluster_with_spot_instances_and_an_on_demand_launch_takes_one_node(
    on_slurm, slurm_cluster, rich_alice, settings
):
    """The issue's test through the console: three interruptible instances fill the cluster; an
    on-demand launch preempts one (the console's choice): its checkpoint runs on the node, Slurm
    requeues its job after the grace period, the on-demand instance runs; when it is released the spot
    instance runs again, same job. Each step billed: the victim's meter stops at the preemption and a
    new one starts when it runs again; the on-demand instance's from when it runs."""
    settings.INSTANCES_PREEMPTION_GRACE_S = 2
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 32  # four 8-card instances
    on_slurm(services=())

    def launch_tier(name: str, tier: str, command: str = "") -> Instance:
        with committed():
            return instance_launch(
                LaunchRequest(
                    user=rich_alice,
                    region=Region.objects.get(slug="slurm-local"),
                    gpu_model=GpuModel.objects.get(slug="h200"),
                    gpu_count=8,
                    image=Image.objects.get(slug="pytorch-2.5-cu124"),
                    disk_gb=20,
                    name=name,
                    tier=tier,
                    checkpoint_command=command,
                )
            )

    spots = [launch_tier(f"spot-{n}", Instance.Tier.INTERRUPTIBLE, CHECKPOINT) for n in range(3)]
    for spot in spots:
        wait_running(spot, timeout=60)

    on_demand = launch_tier("urgent", Instance.Tier.ON_DEMAND)
    victims = [s for s in spots if Instance.objects.get(pk=s.pk).status == S.PREEMPTING]
    assert len(victims) == 1
    victim = Instance.objects.get(pk=victims[0].pk)
    job_id = victim.backend_state["job_id"]
    first = Meter.objects.get(ref=gpu_meter_ref(victim.pk))
    assert first.stopped_at == victim.status_changed_at  # billing stopped at the second of preemption
    home = get_backend(victim.backend_alias).root / victim.key / "home"
    wait_until(lambda: (home / "checkpoint.txt").exists(), timeout=20, what="the checkpoint on the node")

    def reconciled(instance: Instance, wanted: str) -> bool:
        with committed():
            instances_reconcile()
        instance.refresh_from_db()
        return instance.status == wanted

    wait_until(lambda: reconciled(victim, S.PREEMPTED), timeout=30, interval=0.5, what="the power-off")
    wait_until(lambda: slurm_cluster.job(job_id)["restart_cnt"] == 1, timeout=30, what="Slurm's requeue")
    wait_until(lambda: reconciled(on_demand, S.RUNNING), timeout=60, interval=0.5, what="the on-demand instance")
    assert Instance.objects.get(pk=victim.pk).status == S.PREEMPTED  # held in Slurm's queue meanwhile
    assert sum(Instance.objects.get(pk=s.pk).status == S.RUNNING for s in spots) == 2

    with committed():
        instance_release(instance=on_demand)
    wait_until(lambda: reconciled(victim, S.RUNNING), timeout=60, interval=0.5, what="the spot instance again")
    assert victim.backend_state["job_id"] == job_id  # the same job, requeued, its second run
    meters = list(Meter.objects.filter(ref=gpu_meter_ref(victim.pk)).order_by("started_at"))
    assert len(meters) == 2 and meters[0].stopped_at < meters[1].started_at and meters[1].stopped_at is None
    assert meters[1].started_at == victim.running_since
