"""Spot clusters as preemption victims: when single interruptible machines cannot free the cards an
on-demand launch needs, a whole interruptible cluster is preempted, all or nothing. Its cards on the
node taken go to the on-demand work at once; its other nodes' cards stay held until it is off (the
provider still runs it through its grace period), then go back."""

import pytest

from instances.errors import NoCapacity
from instances.models import Instance, Node
from instances.tests.conftest import fund
from instances.tests.test_preemption import after_grace
from instances.tests.test_preemption import launch as preemption_launch

S = Instance.Status
T = Instance.Tier


@pytest.fixture
def bob_rich(bob, catalogue):
    fund(bob, 1_000_000)
    return bob


@pytest.fixture(autouse=True)
def roomy_quota(settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64


def launch(user, *, count, nodes=1, tier=T.ON_DEMAND) -> Instance:
    """On the two A800 nodes of cn-north-1."""
    return preemption_launch(user, count=count, nodes=nodes, tier=tier, gpu="a800-80g")


def free() -> dict[str, int]:
    return dict(
        Node.objects.filter(region__slug="cn-north-1", gpu_model__slug="a800-80g").values_list("name", "free_cards")
    )


def test_a_whole_spot_cluster_is_preempted_when_no_single_machine_frees_enough(rich_alice, bob_rich):
    spot = launch(rich_alice, count=8, nodes=2, tier=T.INTERRUPTIBLE)
    assert set(free().values()) == {0}
    on_demand = launch(bob_rich, count=8)
    spot.refresh_from_db()
    assert spot.status == S.PREEMPTING and spot.preempted_for_id == on_demand.pk
    taken, kept = on_demand.node.name, next(n for n in free() if n != on_demand.node.name)
    # It keeps the node the on-demand work did not need until its machine is off: never counted free early.
    assert spot.node_names == [kept]
    assert free() == {taken: 0, kept: 0}

    after_grace(spot)
    spot.refresh_from_db()
    on_demand.refresh_from_db()
    assert spot.status == S.PREEMPTED and spot.node_names == []
    assert on_demand.status == S.RUNNING
    assert free() == {taken: 0, kept: 8}


def test_single_machines_go_before_a_cluster(rich_alice, bob_rich):
    cluster = launch(rich_alice, count=4, nodes=2, tier=T.INTERRUPTIBLE)  # four cards on each node
    single = launch(rich_alice, count=4, tier=T.INTERRUPTIBLE)
    launch(rich_alice, count=4)  # on-demand: the other node's last four
    assert set(free().values()) == {0}
    on_demand = launch(bob_rich, count=4)
    cluster.refresh_from_db()
    single.refresh_from_db()
    assert (single.status, cluster.status) == (S.PREEMPTING, S.RUNNING)
    assert on_demand.status == S.PROVISIONING and on_demand.displaced_others
    assert cluster.node_names and len(cluster.node_names) == 2  # untouched: both its nodes, all its cards


def test_an_on_demand_cluster_takes_a_spot_cluster_whole_once(rich_alice, bob_rich):
    spot = launch(rich_alice, count=8, nodes=2, tier=T.INTERRUPTIBLE)
    on_demand = launch(bob_rich, count=8, nodes=2)
    spot.refresh_from_db()
    assert spot.status == S.PREEMPTING
    assert spot.node_names == []  # every card of it went to the on-demand cluster
    assert Instance.objects.filter(status=S.PREEMPTING).count() == 1
    assert set(free().values()) == {0}
    after_grace(spot)
    on_demand.refresh_from_db()
    assert on_demand.status == S.RUNNING
    assert set(free().values()) == {0}


def test_interruptible_work_never_preempts_a_spot_cluster(rich_alice, bob_rich):
    spot = launch(rich_alice, count=8, nodes=2, tier=T.INTERRUPTIBLE)
    with pytest.raises(NoCapacity):
        launch(bob_rich, count=8, tier=T.INTERRUPTIBLE)
    spot.refresh_from_db()
    assert spot.status == S.RUNNING
