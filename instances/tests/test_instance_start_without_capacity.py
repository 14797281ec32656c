import pytest

from instances.errors import NoCapacity
from instances.models import Instance
from instances.services import instance_start, instance_stop
from instances.tests.conftest import committed, running

S = Instance.Status


def test_a_start_without_free_cards_leaves_it_stopped_with_the_reason(rich_alice, bob, settings):
    from instances.tests.conftest import fund

    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    instance = running(rich_alice, gpu="h800", count=8)
    with committed():
        instance_stop(instance=instance)
    fund(bob, 1_000_000)
    running(bob, gpu="h800", count=8)  # bob takes the only H800 node meanwhile
    instance.refresh_from_db()

    with pytest.raises(NoCapacity) as exc:
        instance_start(instance=instance)

    assert "H800" in exc.value.message
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.node is None
