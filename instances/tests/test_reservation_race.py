"""The holder and other accounts launching at once into a region with reserved cards, on PostgreSQL,
with real threads: the reservation's cards go to the holder alone, and no card is handed out twice.

The H800 node has 8 cards; 4 are reserved for the holder. Six of the holder's launches and twelve of
others' (one card each) race for them.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.testing import race
from instances.capacity.reservations import reservation_create
from instances.catalogue import catalogue_seed
from instances.errors import NoCapacity
from instances.models import GpuModel, Instance, Node, Region
from instances.services import nodes_sync
from instances.tests.conftest import fund, launch
from providers import get_backend

pytestmark = pytest.mark.django_db(transaction=True)


def test_holder_and_others_racing_never_oversubscribe_and_the_holder_gets_its_reserved_cards(
    settings, django_user_model, staff
):
    if connection.vendor != "postgresql":
        pytest.skip("advisory and row locks are the point: PostgreSQL only")
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    catalogue_seed()
    nodes_sync(alias="default")
    holder = django_user_model.objects.create_user(email="holder@example.com", password="x" * 12)
    others = [django_user_model.objects.create_user(email=f"other{n}@example.com", password="x" * 12) for n in range(6)]
    for user in (holder, *others):
        fund(user, 1_000_000)
    reservation_create(
        account=holder,
        region=Region.objects.get(slug="cn-north-1"),
        gpu_model=GpuModel.objects.get(slug="h800"),
        cards=4,
        ends_at=timezone.now() + timedelta(hours=1),
        staff=staff,
    )

    racers = [holder] * 6 + [others[n % 6] for n in range(12)]
    won, refused, errors = race(
        lambda k: (racers[k].pk, launch(racers[k], gpu="h800", count=1).pk),
        threads=len(racers),
        refusals=(NoCapacity,),
    )

    assert errors == []
    holders_won = sum(1 for owner, _pk in won if owner == holder.pk)
    assert len(won) == 8 and len(refused) == 10
    assert holders_won >= 4  # its reserved cards were never given to anyone else
    assert len(won) - holders_won <= 4
    node = Node.objects.get(gpu_model__slug="h800")
    assert node.free_cards == 0
    assert sum(Instance.objects.filter(node=node).values_list("gpu_count", flat=True)) == node.total_cards
    machines = [m for m in get_backend("default").machines() if m.node == node.name]
    assert len(machines) == 8
