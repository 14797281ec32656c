import re

from billing.models import LedgerAccount, Transaction
from billing.selectors import balance_get
from billing.services import ledger_check_record


def _key(response) -> str:
    return re.search(rb'name="key" value="([0-9a-f]{32})"', response.content).group(1).decode()


def test_strangers_and_anonymous_visitors_get_a_404(client, alice_client):
    assert client.get("/staff/billing/").status_code == 404
    assert alice_client.get("/staff/billing/").status_code == 404
    assert alice_client.post("/staff/billing/ledger-check/").status_code == 404


def test_staff_see_the_last_ledger_checks(client_for, staff):
    ledger_check_record()
    page = client_for(staff).get("/staff/billing/")
    assert page.status_code == 200
    assert b"Balanced" in page.content


def test_staff_adjust_a_balance_by_email_in_yuan(client_for, staff, alice):
    client = client_for(staff)
    key = _key(client.get("/staff/billing/"))
    form = {"email": "ALICE@example.com", "amount": "12.34", "reason": "Goodwill credit", "key": key}
    response = client.post("/staff/billing/", form)
    assert response.status_code == 302
    client.post("/staff/billing/", form)  # a double submit posts once
    assert balance_get(user=alice).cash == 1234
    txn = Transaction.objects.get(kind=Transaction.Kind.ADJUSTMENT)
    assert txn.created_by == staff and txn.description == "Goodwill credit"
    page = client.get("/staff/billing/")
    assert b"Goodwill credit" in page.content and "¥12.34" in page.content.decode()


def test_a_bad_adjustment_is_a_form_error_not_a_500(client_for, staff, alice):
    client = client_for(staff)
    key = _key(client.get("/staff/billing/"))
    for form in (
        {"email": "nobody@example.com", "amount": "1", "reason": "x", "key": key},
        {"email": "alice@example.com", "amount": "1.999", "reason": "x", "key": key},
        {"email": "alice@example.com", "amount": "-5", "reason": "x", "key": key},  # below zero
        {"email": "alice@example.com", "amount": "5", "reason": "", "key": key},
        {"email": "alice@example.com", "amount": "5", "reason": "x", "key": "not-a-key"},
    ):
        response = client.post("/staff/billing/", form)
        assert response.status_code == 200
        assert b"errorlist" in response.content
    assert not Transaction.objects.filter(kind=Transaction.Kind.ADJUSTMENT).exists()


def test_the_admin_cannot_change_the_ledger(client_for, staff, alice):
    from billing.tests.helpers import topup

    txn = topup(alice, 100)
    client = client_for(staff)
    assert client.get(f"/admin/billing/transaction/{txn.pk}/change/").status_code == 200  # view only
    assert client.get("/admin/billing/transaction/add/").status_code == 403
    assert client.post(f"/admin/billing/transaction/{txn.pk}/delete/").status_code == 403
    account = LedgerAccount.objects.get(owner=alice, kind="cash")
    client.post(f"/admin/billing/ledgeraccount/{account.pk}/change/", {"balance": 999999, "floor": 0})
    account.refresh_from_db()
    assert account.balance == 100
