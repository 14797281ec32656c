from datetime import timedelta

from django.utils import timezone

from billing.models import TopUpOrder
from billing.tasks import topup_orders_expire_task


def test_the_periodic_task_expires_only_stale_pending_orders(alice):
    stale = TopUpOrder.objects.create(user=alice, amount_fen=1000, gateway="simulated")
    TopUpOrder.objects.filter(pk=stale.pk).update(created_at=timezone.now() - timedelta(days=2))
    fresh = TopUpOrder.objects.create(user=alice, amount_fen=1000, gateway="simulated")
    assert topup_orders_expire_task() == 1
    assert topup_orders_expire_task() == 0
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == TopUpOrder.Status.EXPIRED
    assert fresh.status == TopUpOrder.Status.PENDING
