"""Invoice requests: paid top-ups and months of paid usage, never trial credit, never twice; the staff
queue issues (PDF) or declines (reason) and the user is told; strangers get 404s."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from billing.models import LedgerAccount, Transaction
from billing.services import account_get, ledger_post, trial_claim
from billing.tests.gateway_helpers import paid_order
from invoices.models import InvoiceRequest
from invoices.selectors import invoice_headroom_fen, invoiceable_month_fen, invoiceable_order_fen
from invoices.services import InvoiceRefused, invoice_decline, invoice_issue, invoice_request, tax_number_clean

PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
ALPHABET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)


def uscc(body: str) -> str:
    """A unified social credit code: 17 characters and the check character GB 32100-2015 gives them."""
    total = sum(ALPHABET.index(c) * w for c, w in zip(body, WEIGHTS, strict=True))
    return body + ALPHABET[(31 - total % 31) % 31]


COMPANY_TAX_NUMBER = uscc("91110108MA01ABCDE")


def last_month():
    return (timezone.localdate().replace(day=1) - timedelta(days=1)).replace(day=1)


def usage(user, fen: int, *, key: str, monkeypatch, when=None):
    """``fen`` of usage charged from the paid balance, posted (by default) in the middle of last month."""
    when = when or timezone.make_aware(datetime.combine(last_month() + timedelta(days=14), datetime.min.time()))
    monkeypatch.setattr(Transaction._meta.get_field("created_at"), "_get_default", lambda: when)
    ledger_post(
        key=key,
        kind=Transaction.Kind.USAGE,
        user=user,
        legs=[
            (account_get(user=user, kind=LedgerAccount.Kind.CASH), -fen),
            (account_get(kind=LedgerAccount.Kind.REVENUE), fen),
        ],
    )
    monkeypatch.undo()


def ask(user, **kwargs):
    defaults = {"title_type": "personal", "title": "Alice Liu", "email": "alice@example.com"}
    return invoice_request(user=user, **{**defaults, **kwargs})


def test_a_paid_top_up_is_invoiced_at_most_once(alice):
    order = paid_order(alice, 5000)
    ask(alice, order_id=order.pk, amount_fen=3000)
    ask(alice, order_id=order.pk, amount_fen=2000)
    with pytest.raises(InvoiceRefused):
        ask(alice, order_id=order.pk, amount_fen=1)
    assert invoiceable_order_fen(order=order) == 0


def test_a_months_paid_usage_can_be_invoiced_but_not_money_invoiced_by_top_up(alice, monkeypatch):
    order = paid_order(alice, 5000)
    usage(alice, 3000, key="usage:1", monkeypatch=monkeypatch)
    assert invoiceable_month_fen(user=alice, month=last_month()) == 3000
    ask(alice, month=last_month(), amount_fen=3000)
    # The same ¥30 cannot be invoiced again as part of the top-up: only what was not invoiced is left.
    assert invoice_headroom_fen(user=alice) == 2000
    with pytest.raises(InvoiceRefused, match="At most"):
        ask(alice, order_id=order.pk, amount_fen=5000)
    ask(alice, order_id=order.pk, amount_fen=2000)
    assert invoice_headroom_fen(user=alice) == 0


def test_trial_credit_is_never_invoiced_nor_a_month_not_over(alice, monkeypatch):
    trial_claim(user=alice)
    trial = account_get(user=alice, kind=LedgerAccount.Kind.TRIAL)
    monkeypatch.setattr(
        Transaction._meta.get_field("created_at"), "_get_default", lambda: timezone.now() - timedelta(days=40)
    )
    ledger_post(
        key="usage:trial",
        kind=Transaction.Kind.USAGE,
        user=alice,
        legs=[(trial, -500), (account_get(kind=LedgerAccount.Kind.TRIAL_REVENUE), 500)],
    )
    monkeypatch.undo()
    assert invoice_headroom_fen(user=alice) == 0
    with pytest.raises(InvoiceRefused):
        ask(alice, month=last_month(), amount_fen=500)
    with pytest.raises(InvoiceRefused):
        ask(alice, month=timezone.localdate().replace(day=1), amount_fen=1)  # this month is not over


def test_a_company_invoice_needs_a_valid_taxpayer_number(alice):
    order = paid_order(alice, 5000)
    assert tax_number_clean(COMPANY_TAX_NUMBER.lower()) == COMPANY_TAX_NUMBER
    for bad in ("", "91110108MA01ABCDE0" if COMPANY_TAX_NUMBER[-1] != "0" else "91110108MA01ABCDE1", "not a number"):
        with pytest.raises(InvoiceRefused):
            ask(alice, order_id=order.pk, amount_fen=100, title_type="company", title="Example Ltd", tax_number=bad)
    invoice = ask(
        alice,
        order_id=order.pk,
        amount_fen=100,
        title_type="company",
        title="Example Ltd",
        tax_number=COMPANY_TAX_NUMBER,
    )
    assert invoice.tax_number == COMPANY_TAX_NUMBER


def test_another_users_top_up_cannot_be_invoiced(alice, charlie):
    order = paid_order(alice, 5000)
    with pytest.raises(InvoiceRefused):
        ask(charlie, order_id=order.pk, amount_fen=100)


def test_staff_issue_with_a_pdf_the_owner_downloads_and_strangers_cannot(
    alice, staff, client_for, charlie_client, django_capture_on_commit_callbacks
):
    order = paid_order(alice, 5000)
    invoice = ask(alice, order_id=order.pk, amount_fen=5000, email="finance@example.com")
    staff_client = client_for(staff)
    queue = staff_client.get("/staff/invoices/").content.decode()
    assert "Alice Liu" in queue and "finance@example.com" in queue
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            f"/staff/invoices/{invoice.pk}/issue/",
            {"invoice_number": "26110000000012345678", "pdf": SimpleUploadedFile("i.pdf", PDF, "application/pdf")},
        )
    assert response.status_code == 302
    invoice.refresh_from_db()
    assert invoice.status == InvoiceRequest.Status.ISSUED and invoice.decided_by == staff
    # The account's address through its notification, the address on the request beside it.
    assert sorted(to for m in mail.outbox for to in m.to) == ["alice@example.com", "finance@example.com"]
    assert all("invoice #" in m.subject for m in mail.outbox)
    download = client_for(alice).get(f"/billing/invoices/{invoice.pk}/pdf/")
    assert download.status_code == 200 and download.content == PDF and download["Content-Type"] == "application/pdf"
    assert charlie_client.get(f"/billing/invoices/{invoice.pk}/pdf/").status_code == 404
    # Deciding twice does nothing more.
    assert invoice_decline(invoice=invoice, staff=staff, reason="Too late") is False


def test_a_file_that_is_not_a_pdf_is_refused(alice, staff):
    invoice = ask(alice, order_id=paid_order(alice, 5000).pk, amount_fen=100)
    with pytest.raises(InvoiceRefused):
        invoice_issue(invoice=invoice, staff=staff, pdf=b"<html>", invoice_number="1")


def test_a_declined_request_is_explained_and_its_amount_can_be_asked_again(
    alice, staff, django_capture_on_commit_callbacks
):
    order = paid_order(alice, 5000)
    invoice = ask(alice, order_id=order.pk, amount_fen=5000)
    with django_capture_on_commit_callbacks(execute=True):
        assert invoice_decline(invoice=invoice, staff=staff, reason="The title must be the company's full name.")
    assert "full name" in mail.outbox[0].body
    assert invoiceable_order_fen(order=order) == 5000
    ask(alice, order_id=order.pk, amount_fen=5000)


def test_the_page_requests_and_lists_and_bad_input_is_a_form_error(alice, alice_client, staff):
    order = paid_order(alice, 5000)
    page = alice_client.get("/billing/invoices/").content.decode()
    assert f'value="order:{order.pk}"' in page
    bad = alice_client.post(
        "/billing/invoices/",
        {
            "covers": f"order:{order.pk}",
            "amount": "60",
            "title_type": "company",
            "title": "Example Ltd",
            "email": "a@example.com",
        },
    )
    assert bad.status_code == 400 and "taxpayer number" in bad.content.decode()
    too_much = alice_client.post(
        "/billing/invoices/",
        {
            "covers": f"order:{order.pk}",
            "amount": "60",
            "title_type": "personal",
            "title": "Alice",
            "email": "a@example.com",
        },
    )
    assert too_much.status_code == 400 and "At most" in too_much.content.decode()
    ok = alice_client.post(
        "/billing/invoices/",
        {
            "covers": f"order:{order.pk}",
            "amount": "50",
            "title_type": "personal",
            "title": "Alice",
            "email": "a@example.com",
        },
        follow=True,
    )
    assert ok.status_code == 200 and InvoiceRequest.objects.get().amount_fen == 5000
    assert alice_client.get("/staff/invoices/").status_code == 404
