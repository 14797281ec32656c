"""The simulated gateway, end to end through the pages: top up, approve or decline, see the result."""

from billing.models import TopUpOrder, Transaction, WebhookEvent
from billing.selectors import balance_get


def start_topup(client, **data):
    response = client.post("/billing/top-up/", data)
    assert response.status_code == 302, response.content
    order = TopUpOrder.objects.latest("id")
    assert response["Location"] == f"/billing/simulated-gateway/{order.pk}/"
    return order


def test_approving_at_the_checkout_credits_the_paid_balance(alice, alice_client):
    order = start_topup(alice_client, preset="5000")
    page = alice_client.get(f"/billing/simulated-gateway/{order.pk}/")
    assert page.status_code == 200
    assert "¥50.00" in page.content.decode()
    assert b'value="approve"' in page.content and b'value="decline"' in page.content

    response = alice_client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "approve"}, follow=True)
    assert response.redirect_chain[-1][0] == f"/billing/orders/{order.pk}/"
    assert "Payment received" in response.content.decode()
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert balance_get(user=alice).cash == 5000
    assert balance_get(user=alice).trial == 0
    # The real path ran: a recorded, signed event and one top-up posting.
    assert WebhookEvent.objects.filter(order=order, event_type="payment.succeeded").count() == 1
    assert Transaction.objects.get(kind=Transaction.Kind.TOPUP).idempotency_key == f"topup:order:{order.pk}"


def test_a_custom_amount_in_yuan_becomes_fen(alice, alice_client):
    order = start_topup(alice_client, amount="123.45")
    assert order.amount_fen == 12345


def test_declining_leaves_the_balance_unchanged(alice, alice_client):
    order = start_topup(alice_client, preset="1000")
    response = alice_client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "decline"}, follow=True)
    assert "declined" in response.content.decode()
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.FAILED
    assert balance_get(user=alice).total == 0
    assert not Transaction.objects.exists()


def test_approving_twice_credits_once(alice, alice_client):
    order = start_topup(alice_client, preset="1000")
    alice_client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "approve"})
    alice_client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "approve"})
    assert balance_get(user=alice).cash == 1000


def test_an_unknown_action_changes_nothing(alice, alice_client):
    order = start_topup(alice_client, preset="1000")
    response = alice_client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "steal"})
    assert response.status_code == 400
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING


def test_charlie_cannot_see_or_pay_alices_order(alice, alice_client, charlie_client):
    order = start_topup(alice_client, preset="1000")
    assert charlie_client.get(f"/billing/orders/{order.pk}/").status_code == 404
    assert charlie_client.get(f"/billing/simulated-gateway/{order.pk}/").status_code == 404
    assert charlie_client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "approve"}).status_code == 404
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING


def test_the_order_page_shows_its_status(alice, alice_client):
    order = start_topup(alice_client, preset="1000")
    page = alice_client.get(f"/billing/orders/{order.pk}/").content.decode()
    assert "Awaiting payment" in page and "Continue to checkout" in page


def test_pages_need_login(client, db):
    for url in ("/billing/", "/billing/statements/", "/billing/transactions/"):
        response = client.get(url)
        assert response.status_code == 302
        assert "/accounts/login/" in response["Location"]


def test_a_pending_order_page_polls_until_the_webhook_lands(alice, alice_client):
    order = start_topup(alice_client, preset="1000")
    page = alice_client.get(f"/billing/orders/{order.pk}/").content.decode()
    assert 'hx-trigger="every 3s"' in page
    alice_client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "approve"})
    page = alice_client.get(f"/billing/orders/{order.pk}/").content.decode()
    assert 'hx-trigger="every 3s"' not in page and "was added to your paid balance" in page
