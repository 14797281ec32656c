"""Elastic clusters on the simulated cloud: a running cluster grows or shrinks by whole nodes, placed all
or nothing in the blocks it spans, billed to the second around the change, refused where the provider
cannot do it."""

from datetime import timedelta
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.tests.factories import UserFactory
from billing.meter_arithmetic import amount_owed
from billing.models import Meter
from billing.selectors import balance_get
from instances.capacity.resize import instance_resize
from instances.errors import NoCapacity, OperationNotAllowed, QuotaExceeded, ResizeNotSupported, ResizeRefused
from instances.models import Instance, InstanceEvent, Node
from instances.reconciler import instances_reconcile
from instances.services import instance_stop, nodes_sync
from instances.skus import gpu_meter_ref
from instances.tests.conftest import backends, committed, fund, launch, running
from providers import get_backend
from providers.simulated.backend import SimulatedBackend
from providers.simulated.models import SimulatedMachine
from teams.context import SESSION_KEY
from teams.models import Membership, Role, TeamEvent
from teams.services import team_create

S = Instance.Status
FLEET = [{"region": "cn-north-1", "gpu": "a800-80g", "nodes": 12, "cards": 8}]


class FixedSizeClusters(SimulatedBackend):
    """The simulated cloud without ``ClusterResizeCapability``: as Slurm and Kubernetes are today."""

    supports_cluster_resize = False


@pytest.fixture
def blocky(settings, rich_alice):
    """Twelve A800 nodes in three blocks of four: 01-04 in b1, 05-08 in b2, 09-12 in b3."""
    settings.PROVISIONING_BACKENDS = backends(FLEET=FLEET, BLOCK_NODES=4)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 96
    settings.INSTANCES_MAX_NODES = 8
    nodes_sync(alias="default")
    return rich_alice


def _block(name: str) -> str:
    return Node.objects.get(name=name).block


def _free() -> dict[str, int]:
    return dict(Node.objects.order_by("name").values_list("name", "free_cards"))


def _open_meter(instance) -> Meter:
    return Meter.objects.get(ref=gpu_meter_ref(instance.pk), stopped_at__isnull=True)


def test_growing_adds_nodes_after_the_others_in_the_clusters_block_and_keeps_rank_0(blocky):
    cluster = running(blocky, count=8, nodes=2)
    head, peers = cluster.node.name, list(cluster.extra_nodes)
    grown = instance_resize(instance=cluster, node_count=4, actor=blocky)
    assert grown.status == S.RUNNING
    assert grown.node_count == 4
    assert grown.node.name == head  # rank 0, MASTER_ADDR: unchanged
    assert grown.extra_nodes[:1] == peers  # the old ranks keep theirs; the new ones come after
    assert {_block(n) for n in grown.node_names} == {_block(head)}  # one block still
    assert grown.hourly_price_fen == 32 * 190
    assert sum(_free().values()) == 12 * 8 - 32
    machine = SimulatedMachine.objects.get(key=grown.key)
    assert machine.node.name == head
    assert machine.spec["peers"] == grown.extra_nodes
    assert machine.spec["resizes"] == [4]


def test_growing_past_the_clusters_block_spans_the_fewest_other_blocks(blocky):
    launch(blocky, count=8, nodes=1)  # takes one b1 node (best fit)
    cluster = running(blocky, count=8, nodes=2)  # two more of b1 (the block that fits best): one left there
    assert {_block(n) for n in cluster.node_names} == {"cn-north-1-a800-80g-b1"}
    grown = instance_resize(instance=cluster, node_count=4, actor=blocky)
    blocks = [_block(n) for n in grown.node_names]
    assert blocks.count("cn-north-1-a800-80g-b1") == 3  # the last b1 node joined first
    assert len(set(blocks)) == 2


def test_shrinking_lets_the_last_ranks_go_and_gives_their_cards_back(blocky):
    cluster = running(blocky, count=8, nodes=4)
    head, peers = cluster.node.name, list(cluster.extra_nodes)
    shrunk = instance_resize(instance=cluster, node_count=2, actor=blocky)
    assert shrunk.node.name == head
    assert shrunk.extra_nodes == peers[:1]
    assert sum(_free().values()) == 12 * 8 - 16
    for name in peers[1:]:
        assert _free()[name] == 8
    assert SimulatedMachine.objects.get(key=shrunk.key).spec["peers"] == peers[:1]
    assert _open_meter(shrunk).quantity == 16
    assert shrunk.hourly_price_fen == 16 * 190


def test_the_timeline_says_who_resized_it_and_which_nodes_joined(blocky):
    cluster = running(blocky, count=8, nodes=2)
    grown = instance_resize(instance=cluster, node_count=4, actor=blocky)
    rows = list(grown.events.filter(kind=InstanceEvent.Kind.NODE).order_by("id"))
    assert [(e.old, e.new) for e in rows] == [(S.RUNNING, S.RUNNING)] * 2
    assert blocky.email in rows[0].reason_text
    said = rows[1].reason_text
    assert "from 2 to 4 nodes" in said
    assert all(name in said for name in grown.extra_nodes[1:])
    assert grown.node.name in said


def test_resizing_to_the_size_it_has_changes_nothing(blocky):
    cluster = running(blocky, count=8, nodes=2)
    events = cluster.events.count()
    instance_resize(instance=cluster, node_count=4)
    cluster.refresh_from_db()
    again = instance_resize(instance=cluster, node_count=4)
    assert again.node_count == 4
    assert cluster.events.count() == events + 1
    assert Meter.objects.filter(ref=gpu_meter_ref(cluster.pk)).count() == 2


def test_billing_follows_to_the_fen_around_a_resize(blocky):
    cluster = running(blocky, count=8, nodes=2)
    before = balance_get(user=blocky).cash
    t1 = timezone.now() + timedelta(hours=1)
    Meter.objects.filter(ref=gpu_meter_ref(cluster.pk)).update(started_at=t1 - timedelta(seconds=1000.5))
    with mock.patch("django.utils.timezone.now", return_value=t1):
        instance_resize(instance=cluster, node_count=4)
    old, new = Meter.objects.filter(ref=gpu_meter_ref(cluster.pk)).order_by("started_at")
    assert old.stopped_at == new.started_at == t1  # no second unbilled, none billed twice
    assert (old.quantity, new.quantity) == (16, 32)
    cluster.refresh_from_db()
    with mock.patch("django.utils.timezone.now", return_value=t1 + timedelta(seconds=600)), committed():
        instance_stop(instance=cluster)
    old.refresh_from_db()
    new.refresh_from_db()
    expected_old = amount_owed(price_fen=190, quantity=16, unit_seconds=3600, seconds=1000)  # 844.4 → 844
    expected_new = amount_owed(price_fen=190, quantity=32, unit_seconds=3600, seconds=600)  # 1,013.3 → 1,013
    assert (old.charged_fen, new.charged_fen) == (844, 1013) == (expected_old, expected_new)
    assert before - balance_get(user=blocky).cash == 844 + 1013


def test_growing_without_room_is_refused_and_takes_nothing(blocky, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 200
    running(blocky, count=8, nodes=8)
    launch(blocky, count=8, nodes=1)
    small = running(blocky, count=8, nodes=2)
    launch(blocky, count=4, nodes=1)  # the last node keeps four free cards: too few to join
    free = _free()
    with pytest.raises(NoCapacity) as refused:
        instance_resize(instance=small, node_count=4)
    assert "only 0 other nodes" in refused.value.message
    small.refresh_from_db()
    assert small.node_count == 2
    assert _free() == free
    assert _open_meter(small).quantity == 16


def test_growing_past_the_quota_is_refused(blocky, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 24
    cluster = running(blocky, count=8, nodes=2)
    with pytest.raises(QuotaExceeded):
        instance_resize(instance=cluster, node_count=4)
    cluster.refresh_from_db()
    assert cluster.node_count == 2
    assert sum(_free().values()) == 12 * 8 - 16


def test_a_node_the_provider_refuses_rolls_the_whole_resize_back(blocky, settings):
    cluster = running(blocky, count=8, nodes=2)
    free = _free()
    # The provider has lost the node the console would choose next; the console does not know yet.
    next_up = next(n for n in sorted(free) if free[n] == 8 and _block(n) == _block(cluster.node.name))
    settings.PROVISIONING_BACKENDS = backends(FLEET=FLEET, BLOCK_NODES=4, LOST_NODES=[next_up])
    with pytest.raises(ResizeRefused) as refused:
        instance_resize(instance=cluster, node_count=4)
    assert "out of service" in refused.value.message
    cluster.refresh_from_db()
    assert cluster.node_count == 2
    assert _free() == free
    assert SimulatedMachine.objects.get(key=cluster.key).spec["peers"] == cluster.extra_nodes


def test_only_a_running_cluster_is_resized(blocky):
    single = running(blocky, count=8)
    with pytest.raises(ResizeNotSupported):
        instance_resize(instance=single, node_count=2)
    cluster = running(blocky, count=8, nodes=2)
    with committed():
        instance_stop(instance=cluster)
    cluster.refresh_from_db()
    with pytest.raises(OperationNotAllowed):
        instance_resize(instance=cluster, node_count=4)


def test_a_provider_without_the_capability_refuses_with_its_code(blocky, settings, alice_client):
    cluster = running(blocky, count=8, nodes=2)
    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": "instances.tests.test_cluster_resize.FixedSizeClusters",
            "OPTIONS": {"FLEET": FLEET, "BLOCK_NODES": 4, "BOOT_DELAY_S": 0},
        }
    }
    url = reverse("api-instance-resize", args=[cluster.pk])
    response = alice_client.post(url, {"node_count": 4}, content_type="application/json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "resize_not_supported"
    cluster.refresh_from_db()
    assert cluster.node_count == 2


def test_the_api_resizes_and_answers_bad_sizes_with_a_400_and_strangers_with_a_404(
    blocky, alice_client, charlie_client
):
    cluster = running(blocky, count=8, nodes=2)
    url = reverse("api-instance-resize", args=[cluster.pk])
    assert charlie_client.post(url, {"node_count": 4}, content_type="application/json").status_code == 404
    bad = alice_client.post(url, {"node_count": 3}, content_type="application/json")
    assert bad.status_code == 400
    assert "node_count" in bad.json()["error"]["fields"]
    assert alice_client.post(url, {"node_count": "x"}, content_type="application/json").status_code == 400
    response = alice_client.post(url, {"node_count": 4}, content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["node_count"] == 4


def test_the_instance_page_offers_the_sizes_and_resizes(blocky, alice_client):
    cluster = running(blocky, count=8, nodes=2)
    page = alice_client.get(reverse("instance_detail", args=[cluster.pk])).content.decode()
    assert 'id="cluster-size"' in page
    assert '<option value="4">4</option>' in page
    response = alice_client.post(reverse("instance_resize", args=[cluster.pk]), {"node_count": 4})
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert cluster.node_count == 4
    assert alice_client.post(reverse("instance_resize", args=[cluster.pk]), {"node_count": 3}).status_code == 302
    cluster.refresh_from_db()
    assert cluster.node_count == 4


def test_a_grown_cluster_whose_new_node_fails_moves_whole_at_its_new_size(blocky, settings):
    settings.PROVISIONING_BACKENDS = backends(FLEET=FLEET, BLOCK_NODES=4, DISK_FOLLOWS=True)
    cluster = running(blocky, count=8, nodes=2)
    grown = instance_resize(instance=cluster, node_count=4)
    lost = grown.extra_nodes[-1]
    get_backend("default").node_lose(name=lost)
    with committed():
        instances_reconcile()
    grown.refresh_from_db()
    assert grown.status == S.RUNNING
    assert grown.node_count == 4 and len(set(grown.node_names)) == 4
    assert lost not in grown.node_names
    assert sum(_free().values()) == 12 * 8 - 32  # every card back where it left, once
    assert _open_meter(grown).quantity == 32


def test_in_a_team_an_admin_resizes_a_members_cluster_on_the_audit_log_and_a_teammate_may_not(
    blocky, client, catalogue
):
    team = team_create(user=blocky, name="Lab")
    fund(team.account, 1_000_000)
    ada, mia, max_ = (UserFactory(email=f"{n}@example.com") for n in ("ada", "mia", "max"))
    Membership.objects.create(team=team, user=ada, role=Role.ADMIN)
    Membership.objects.create(team=team, user=mia, role=Role.MEMBER)
    Membership.objects.create(team=team, user=max_, role=Role.MEMBER)
    with committed():
        cluster = launch(team.account, actor=mia, count=8, nodes=2, name="mia-train")
    url = reverse("api-instance-resize", args=[cluster.pk])
    client.force_login(max_)
    session = client.session
    session[SESSION_KEY] = team.pk
    session.save()
    assert client.post(url, {"node_count": 4}, content_type="application/json").status_code == 403
    client.force_login(ada)
    session = client.session
    session[SESSION_KEY] = team.pk
    session.save()
    assert client.post(url, {"node_count": 4}, content_type="application/json").status_code == 200
    event = TeamEvent.objects.get(team=team, action=TeamEvent.Action.INSTANCE_RESIZED)
    assert (event.actor_id, event.target) == (ada.pk, "mia-train")
