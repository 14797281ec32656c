"""Staff find top-up orders in the admin by e-mail, order number or the gateway's reference; read-only."""

from __future__ import annotations

import pytest

from billing.tests.gateway_helpers import paid_order, pending_order


@pytest.fixture
def staff_client(client_for, staff):
    return client_for(staff)


@pytest.fixture
def orders(alice, charlie):
    return paid_order(alice, amount_fen=12345), pending_order(charlie, amount_fen=6789)


def test_staff_find_alice_s_orders_by_her_e_mail(staff_client, orders):
    page = staff_client.get("/admin/billing/topuporder/", {"q": "alice@"}).content.decode()
    assert "¥123.45" in page and "¥67.89" not in page


def test_staff_find_an_order_by_number_and_by_reference(staff_client, orders):
    alice_order, charlie_order = orders
    page = staff_client.get("/admin/billing/topuporder/", {"q": str(charlie_order.pk)}).content.decode()
    assert "¥67.89" in page and "¥123.45" not in page
    alice_order.refresh_from_db()
    assert alice_order.gateway_reference
    page = staff_client.get("/admin/billing/topuporder/", {"q": alice_order.gateway_reference}).content.decode()
    assert "¥123.45" in page and "¥67.89" not in page


def test_staff_filter_orders_by_status(staff_client, orders):
    page = staff_client.get("/admin/billing/topuporder/", {"status__exact": "pending"}).content.decode()
    assert "¥67.89" in page and "¥123.45" not in page


def test_a_word_is_no_order_number(staff_client, orders):
    assert staff_client.get("/admin/billing/topuporder/", {"q": "sim_pay"}).status_code == 200


def test_orders_are_read_only(staff_client, orders):
    alice_order, _ = orders
    assert staff_client.get("/admin/billing/topuporder/add/").status_code == 403
    response = staff_client.post(f"/admin/billing/topuporder/{alice_order.pk}/change/", {"status": "refunded"})
    assert response.status_code == 403
    alice_order.refresh_from_db()
    assert alice_order.status == "paid"


def test_alice_is_not_staff_and_gets_the_login_page(alice_client):
    assert alice_client.get("/admin/billing/topuporder/").status_code == 302
