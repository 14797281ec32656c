"""Large clusters: up to 1,024 nodes × 8 cards on the simulated cloud, placed all or nothing in the
fewest network blocks (leaf switches), one statement whatever the size."""

import pytest

from instances.capacity.takeback import blocks_choose
from instances.errors import NoCapacity
from instances.models import Instance, Node
from instances.services import nodes_sync
from instances.tests.conftest import backends, launch, running
from providers import get_backend

S = Instance.Status


@pytest.mark.parametrize(
    ("fitting", "nodes", "chosen"),
    [
        ({"b1": 32, "b2": 10, "b3": 20}, 16, ["b3"]),  # the smallest block that holds it whole
        ({"b1": 32, "b2": 10, "b3": 20}, 40, ["b1", "b3"]),  # fullest first: two blocks, not three
        ({"b1": 5, "b2": 5, "b3": 5}, 12, ["b1", "b2", "b3"]),
        ({"b1": 5, "b2": 5}, 11, None),
        ({"": 3}, 2, [""]),  # a provider without blocks: one block
    ],
)
def test_blocks_are_chosen_to_be_the_fewest(fitting, nodes, chosen):
    assert blocks_choose(fitting, nodes) == chosen


@pytest.fixture
def blocky(settings, rich_alice):
    """Twelve A800 nodes in three blocks of four; node 01-04 in b1, 05-08 in b2, 09-12 in b3."""
    fleet = [{"region": "cn-north-1", "gpu": "a800-80g", "nodes": 12, "cards": 8}]
    settings.PROVISIONING_BACKENDS = backends(FLEET=fleet, BLOCK_NODES=4)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 9000
    settings.INSTANCES_MAX_NODES = 1024
    nodes_sync(alias="default")
    return rich_alice


def blocks_of(instance) -> set[str]:
    return set(Node.objects.filter(name__in=instance.node_names).values_list("block", flat=True))


def test_nodes_carry_their_block_from_the_provider(blocky):
    assert Node.objects.get(name="cn-north-1-a800-80g-05").block == "cn-north-1-a800-80g-b2"


def test_a_gang_that_fits_in_one_block_gets_one_block(blocky):
    launch(blocky, count=8, nodes=2)  # b1 now has two nodes fitting, b2 and b3 four each
    cluster = launch(blocky, count=8, nodes=4)
    assert len(blocks_of(cluster)) == 1
    small = launch(blocky, count=8, nodes=2)
    assert blocks_of(small) == {"cn-north-1-a800-80g-b1"}  # best fit: the block with just two left


def test_a_gang_larger_than_any_block_spans_the_fewest(blocky):
    launch(blocky, count=8, nodes=1)  # one node of b1 taken: b1 has three left
    cluster = launch(blocky, count=8, nodes=8)
    assert blocks_of(cluster) == {"cn-north-1-a800-80g-b2", "cn-north-1-a800-80g-b3"}


def test_a_gang_that_does_not_fit_takes_no_node(blocky):
    launch(blocky, count=8, nodes=8)
    with pytest.raises(NoCapacity):
        launch(blocky, count=8, nodes=8)
    assert sum(Node.objects.values_list("free_cards", flat=True)) == 4 * 8


def test_an_8192_card_cluster_is_placed_all_or_nothing(settings, rich_alice):
    fleet = [{"region": "cn-north-1", "gpu": "a800-80g", "nodes": 1024, "cards": 8}]
    settings.PROVISIONING_BACKENDS = backends(FLEET=fleet)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 9000
    settings.INSTANCES_MAX_NODES = 1024
    from instances.tests.conftest import fund

    fund(rich_alice, 100_000_000)
    cluster = running(rich_alice, count=8, nodes=1024)
    assert cluster.status == S.RUNNING and cluster.total_gpus == 8192
    assert len(set(cluster.node_names)) == 1024
    assert not Node.objects.exclude(free_cards=0).exists()
    machine = next(m for m in get_backend("default").machines() if m.key == cluster.key)
    assert machine.cards == 8192
    with pytest.raises(NoCapacity):
        launch(rich_alice, count=1)
