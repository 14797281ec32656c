"""100 concurrent on-demand launches against a node full of interruptible work, on PostgreSQL, real threads.

Every on-demand launch finds no free card and preempts; the victims' rows and the node's count are
the contested rows. Exactly as many launches win as the node has cards, every victim is preempted
once (one PREEMPTING event, one GPU meter closed once), and no card is ever held twice.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from billing.models import Meter
from core.testing import race
from instances.capacity.preemption import preemptions_finish_due
from instances.catalogue import catalogue_seed
from instances.errors import NoCapacity
from instances.models import Instance, InstanceEvent, Node
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed, fund, launch
from providers import get_backend

pytestmark = pytest.mark.django_db(transaction=True)
S = Instance.Status


def test_a_hundred_on_demand_launches_against_a_full_spot_fleet_never_oversubscribe(settings, django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are the point: PostgreSQL only")
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    catalogue_seed()
    spot_owner = django_user_model.objects.create_user(email="spot@example.com", password="x" * 12)
    fund(spot_owner, 1_000_000)
    with committed():
        spots = [launch(spot_owner, gpu="h800", tier=Instance.Tier.INTERRUPTIBLE) for _ in range(8)]
    assert Instance.objects.filter(pk__in=[s.pk for s in spots], status=S.RUNNING).count() == 8
    users = []
    for n in range(20):
        user = django_user_model.objects.create_user(email=f"racer{n}@example.com", password="x" * 12)
        fund(user, 1_000_000)
        users.append(user)

    won, refused, errors = race(
        lambda k: launch(users[k % 20], gpu="h800", tier=Instance.Tier.ON_DEMAND).pk,
        threads=50,
        each=2,
        refusals=(NoCapacity,),
    )

    assert errors == []
    assert (len(won), len(refused)) == (8, 92)
    node = Node.objects.get(gpu_model__slug="h800")
    assert node.free_cards == 0
    holders = Instance.objects.filter(node=node)
    assert sum(holders.values_list("gpu_count", flat=True)) == node.total_cards
    assert set(holders.values_list("pk", flat=True)) == set(won)  # every card with an on-demand winner
    # Each victim preempted exactly once, for exactly one winner, and its GPU meter closed once.
    victims = Instance.objects.filter(pk__in=[s.pk for s in spots])
    assert set(victims.values_list("status", flat=True)) == {S.PREEMPTING}
    assert set(victims.values_list("preempted_for", flat=True)) == set(won)
    for victim in spots:
        assert InstanceEvent.objects.filter(instance=victim, new=S.PREEMPTING).count() == 1
        assert list(Meter.objects.filter(ref=gpu_meter_ref(victim.pk)).values_list("stopped_at", flat=True)) != [None]
        assert Meter.objects.filter(ref=gpu_meter_ref(victim.pk)).count() == 1

    # After the grace period the winners' machines are created, and the provider agrees: eight cards
    # of on-demand work on the node, the preempted machines off, nothing refused or failed.
    with committed():
        assert preemptions_finish_due(now=timezone.now() + timedelta(seconds=31)) == 8
    assert set(Instance.objects.filter(pk__in=won).values_list("status", flat=True)) == {S.RUNNING}
    assert set(victims.values_list("status", flat=True)) == {S.PREEMPTED}
    on_node = {m.key: m for m in get_backend("default").machines() if m.node == node.name}
    assert set(on_node) == {str(pk) for pk in won}
    assert not Instance.objects.filter(status=S.FAILED).exists()
