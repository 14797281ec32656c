"""However often and however concurrently a gateway delivers "paid", the wallet is credited once."""

import pytest

from billing.models import Entry, TopUpOrder, Transaction, WebhookEvent
from billing.selectors import balance_get
from billing.tests.gateway_helpers import deliver, event_body, pending_order
from core.testing import race


def test_the_same_webhook_ten_times_credits_once(alice):
    order = pending_order(alice, 10000)
    body = event_body(order, event_id="evt_ten")
    results = [deliver(body).json()["result"] for _ in range(10)]
    assert results == ["credited"] + ["duplicate"] * 9
    assert balance_get(user=alice).cash == 10000
    assert Transaction.objects.filter(kind=Transaction.Kind.TOPUP).count() == 1
    assert WebhookEvent.objects.count() == 1


def test_different_events_saying_paid_still_credit_once(alice):
    order = pending_order(alice, 10000)
    for i in range(10):
        assert deliver(event_body(order, event_id=f"evt_{i}")).status_code == 200
    assert balance_get(user=alice).cash == 10000
    assert Transaction.objects.get(kind=Transaction.Kind.TOPUP).idempotency_key == f"topup:order:{order.pk}"


def test_a_decline_after_payment_does_not_undo_it(alice):
    order = pending_order(alice, 10000)
    deliver(event_body(order, event_id="evt_paid"))
    assert deliver(event_body(order, approve=False, event_id="evt_failed")).json()["result"] == "ignored"
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert balance_get(user=alice).cash == 10000


def test_a_late_payment_after_a_decline_credits(alice):
    order = pending_order(alice, 10000)
    deliver(event_body(order, approve=False, event_id="evt_failed"))
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.FAILED
    assert deliver(event_body(order, event_id="evt_paid")).json()["result"] == "credited"
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert balance_get(user=alice).cash == 10000


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicate_webhooks_credit_once(alice):
    order = pending_order(alice, 10000)
    bodies = [event_body(order, event_id="evt_dup")] * 8 + [
        event_body(order, event_id=f"evt_other_{i}") for i in range(4)
    ]
    statuses, _refused, errors = race(lambda k: deliver(bodies[k]).status_code, threads=len(bodies), timeout=30)
    assert errors == []
    assert statuses == [200] * len(bodies)
    assert balance_get(user=alice).cash == 10000
    assert Transaction.objects.filter(kind=Transaction.Kind.TOPUP).count() == 1
    assert WebhookEvent.objects.filter(event_id="evt_dup").count() == 1
    assert sum(Entry.objects.values_list("amount", flat=True)) == 0
