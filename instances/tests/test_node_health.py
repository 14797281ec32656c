"""A node that goes down, drains or disappears is noticed: its instances are told on their timelines,
machines the provider lost with it are marked lost, and it takes no new instances."""

from instances.models import Instance, InstanceEvent, Node
from instances.reconciler import instances_reconcile
from instances.services import nodes_sync, region_nodes_sync
from instances.tests.conftest import committed, launch, running
from providers import get_backend

S = Instance.Status


def node_notes(instance) -> list[str]:
    return [e.reason_text for e in instance.events.filter(kind=InstanceEvent.Kind.NODE)]


def test_a_node_that_goes_down_notes_it_on_the_timeline_then_its_instances_are_lost(rich_alice):
    instance = running(rich_alice, count=2)
    node = instance.node
    get_backend("default").node_lose(name=node.name)

    with committed():
        report = instances_reconcile()

    instance.refresh_from_db()
    assert instance.status == S.LOST
    assert node_notes(instance) == [f"Node {node.name} is out of service (down): it takes no new instances"]
    note = instance.events.get(kind=InstanceEvent.Kind.NODE)
    lost = instance.events.get(new=S.LOST)
    # The note comes before the loss, and leaves the status as it was.
    assert (note.old, note.new) == (S.RUNNING, S.RUNNING)
    assert (note.created_at, note.pk) < (lost.created_at, lost.pk)
    node.refresh_from_db()
    assert (node.is_healthy, node.health_detail) == (False, "down")
    assert node.free_cards == node.total_cards  # the lost machine's cards came back
    north = report["regions"]["cn-north-1"]
    assert north["lost"] == 1 and north["unhealthy_nodes"] == 1 and north["health_changes"] == 1
    assert report["regions"]["cn-east-1"]["lost"] == 0


def test_a_draining_node_notes_it_but_its_instances_run_on_and_it_takes_no_new_ones(rich_alice):
    instance = running(rich_alice, count=4)
    name = instance.node.name
    get_backend("default").node_drain(name=name)

    with committed():
        instances_reconcile()
        placed = launch(rich_alice, count=4)  # would fit on the drained node's other 4 cards

    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert node_notes(instance) == [f"Node {name} is out of service (draining): it takes no new instances"]
    assert placed.node.name != name


def test_a_node_back_in_service_is_noted_and_takes_instances_again(rich_alice):
    instance = running(rich_alice)
    name = instance.node.name
    backend = get_backend("default")
    backend.node_drain(name=name)
    nodes_sync(alias="default")
    backend.node_drain(name=name, draining=False)
    nodes_sync(alias="default")

    assert node_notes(instance) == [
        f"Node {name} is out of service (draining): it takes no new instances",
        f"Node {name} is back in service",
    ]
    assert Node.objects.get(name=name).is_healthy is True


def test_a_node_the_backend_stops_reporting_is_noted_once(rich_alice):
    instance = running(rich_alice)
    name = instance.node.name
    from providers.simulated.models import SimulatedNode

    # The provider decommissioned the node (its machine goes with it).
    SimulatedNode.objects.filter(name=name).delete()
    nodes_sync(alias="default")
    nodes_sync(alias="default")  # a second sync (another reconciler) adds nothing

    assert node_notes(instance) == [
        f"Node {name} is out of service (no longer reported by its provider): it takes no new instances"
    ]
    node = Node.objects.get(name=name)
    assert (node.is_healthy, node.health_detail) == (False, "not reported")


def test_a_sync_repeated_writes_one_note(rich_alice):
    instance = running(rich_alice)
    get_backend("default").node_drain(name=instance.node.name)
    for _ in range(3):
        nodes_sync(alias="default")
    assert len(node_notes(instance)) == 1


def test_a_node_note_is_not_counted_as_a_crash(rich_alice, settings):
    """The crash limit counts repairs (status to itself); node notes have the same shape but are not crashes."""
    settings.INSTANCES_CRASH_LIMIT = 2
    instance = running(rich_alice)
    backend = get_backend("default")
    backend.node_drain(name=instance.node.name)
    nodes_sync(alias="default")
    crashes = InstanceEvent.objects.filter(
        instance=instance, old=S.RUNNING, new=S.RUNNING, kind=InstanceEvent.Kind.STATUS
    ).count()
    assert crashes == 0


def test_staff_sync_now_marks_what_a_lost_node_took_at_once(rich_alice):
    instance = running(rich_alice)
    get_backend("default").node_lose(name=instance.node.name)

    with committed():
        result = region_nodes_sync(region=instance.region)

    instance.refresh_from_db()
    assert instance.status == S.LOST
    assert result == {"nodes": 3, "unhealthy": 1, "synced": 1}
    assert len(node_notes(instance)) == 1


def test_the_node_note_shows_on_the_timeline_and_in_the_api(rich_alice, alice_client):
    instance = running(rich_alice)
    get_backend("default").node_drain(name=instance.node.name)
    nodes_sync(alias="default")

    page = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    assert f"Node {instance.node.name} is out of service (draining)" in page
    events = alice_client.get(f"/api/v1/instances/{instance.pk}/events/").json()["results"]
    assert [e["kind"] for e in events][-1] == "node"
