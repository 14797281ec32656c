from billing.hooks import out_of_funds
from billing.models import Meter
from instances.models import Instance
from instances.skus import disk_meter_ref
from instances.tests.conftest import running

S = Instance.Status


def test_the_billing_hook_stops_the_owners_running_instances_and_keeps_their_disks(rich_alice, bob):
    from instances.tests.conftest import committed, fund

    fund(bob, 100_000)
    first = running(rich_alice)
    second = running(rich_alice, count=2)
    bobs = running(bob)
    hook = out_of_funds  # instances' answer, registered by InstancesConfig.ready()

    with committed():
        assert hook(user_id=rich_alice.pk) == 2

    for instance in (first, second):
        instance.refresh_from_db()
        assert instance.status == S.STOPPED
        assert "balance ran out" in instance.events.get(new=S.STOPPING).reason_text
        assert Meter.objects.filter(ref=disk_meter_ref(instance.pk), stopped_at__isnull=True).exists()
    bobs.refresh_from_db()
    assert bobs.status == S.RUNNING


def test_the_hook_twice_stops_once(rich_alice):
    from instances.tests.conftest import committed

    instance = running(rich_alice)
    hook = out_of_funds  # instances' answer, registered by InstancesConfig.ready()
    with committed():
        hook(user_id=rich_alice.pk)
        assert hook(user_id=rich_alice.pk) == 0
    assert instance.events.filter(new=S.STOPPED).count() == 1
