"""Invoice requests: what can be invoiced, asking, issuing and declining.

The rule the tax office cares about: no paid fen is invoiced twice, and trial credit never. Three
bounds hold for every request, checked while the user's paid-balance row is locked, so two
requests at once are checked one after the other:

* a top-up: at most what remains of it (paid, less refunded, less already asked for);
* a month's usage: at most what the paid balance was charged that month, less already asked for;
* overall: everything asked for (not declined) at most the money the user paid and kept (top-ups
  less refunds), so invoicing the same money once by top-up and again as usage is refused too.
"""

from __future__ import annotations

import logging
import re
from datetime import date

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from billing.models import LedgerAccount, TopUpOrder
from billing.services import account_get
from core import statemachine
from core.formatting import cny
from invoices.models import InvoiceRequest
from invoices.selectors import invoice_headroom_fen, invoiceable_month_fen, invoiceable_order_fen
from notifications.models import Kind
from notifications.services import Message, language_of, notify

logger = logging.getLogger(__name__)

Status = InvoiceRequest.Status
PDF_MAX_BYTES = 5 * 1024 * 1024

# 统一社会信用代码 (GB 32100-2015): 18 characters from this alphabet, the last a check character.
_USCC_ALPHABET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
_USCC_WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)


class InvoiceRefused(Exception):
    """A request or a decision that cannot be made; the message is for the person who tried."""


class InvalidTransition(InvoiceRefused, statemachine.InvalidTransition):
    pass


def tax_number_clean(text: str) -> str:
    """A taxpayer number, upper-cased: an 18-character unified social credit code with a valid check
    character, or an older 15-, 17- or 20-character registration number. Raises ``InvoiceRefused``."""
    value = re.sub(r"\s+", "", text or "").upper()
    if len(value) == 18 and all(c in _USCC_ALPHABET for c in value):
        total = sum(_USCC_ALPHABET.index(c) * w for c, w in zip(value[:17], _USCC_WEIGHTS, strict=True))
        if _USCC_ALPHABET[(31 - total % 31) % 31] == value[17]:
            return value
    elif len(value) in (15, 17, 20) and value.isalnum() and value.isascii():
        return value
    raise InvoiceRefused(_("Enter the company's taxpayer number (the 18-character unified social credit code)."))


def invoice_request(
    *,
    user,
    amount_fen: int,
    title_type: str,
    title: str,
    email: str,
    tax_number: str = "",
    order_id: int | None = None,
    month: date | None = None,
) -> InvoiceRequest:
    """Ask for an invoice of ``amount_fen`` of one paid top-up (``order_id``) or of a month's usage
    (``month``). Raises ``InvoiceRefused`` with what the user may ask for instead."""
    if not isinstance(amount_fen, int) or isinstance(amount_fen, bool) or amount_fen <= 0:
        raise InvoiceRefused(_("An invoice is for a positive amount."))
    if (order_id is None) == (month is None):
        raise InvoiceRefused(_("Choose a paid top-up or a month."))
    title = (title or "").strip()
    if not title:
        raise InvoiceRefused(_("Enter the invoice title: your name, or the company's name."))
    if title_type == InvoiceRequest.TitleType.COMPANY:
        tax_number = tax_number_clean(tax_number)
    elif title_type == InvoiceRequest.TitleType.PERSONAL:
        tax_number = ""
    else:
        raise InvoiceRefused(_("Choose a personal or a company invoice."))
    with transaction.atomic():
        # The paid-balance row is the user's lock: requests are bounded one after the other.
        cash = account_get(user=user, kind=LedgerAccount.Kind.CASH)
        LedgerAccount.objects.select_for_update().filter(pk=cash.pk).exists()
        if order_id is not None:
            order = TopUpOrder.objects.filter(pk=order_id, user=user).first()
            if order is None:
                raise InvoiceRefused(_("No such top-up."))
            bound = invoiceable_order_fen(order=order)
        else:
            order = None
            bound = invoiceable_month_fen(user=user, month=month)
        bound = min(bound, invoice_headroom_fen(user=user))
        if amount_fen > bound:
            raise InvoiceRefused(
                _("At most %(amount)s of this can still be invoiced.") % {"amount": cny(bound)}
                if bound
                else _("Nothing of this can be invoiced: it was not paid, or it was invoiced already.")
            )
        return InvoiceRequest.objects.create(
            user=user,
            kind=InvoiceRequest.Kind.TOPUP if order else InvoiceRequest.Kind.USAGE,
            order=order,
            month=month,
            amount_fen=amount_fen,
            title_type=title_type,
            title=title[:200],
            tax_number=tax_number,
            email=email,
        )


def _decide(*, invoice: InvoiceRequest, dst: str, changes: dict) -> bool:
    return statemachine.transition(
        model=InvoiceRequest,
        pk=invoice.pk,
        table=InvoiceRequest.TRANSITIONS,
        src=Status.REQUESTED,
        dst=dst,
        changes={"decided_at": timezone.now(), **changes},
        error=InvalidTransition,
    )


def invoice_issue(*, invoice: InvoiceRequest, staff, pdf: bytes, invoice_number: str) -> bool:
    """Mark a requested invoice issued with its PDF and number, and tell the user. ``False``: decided already."""
    if not pdf.startswith(b"%PDF-"):
        raise InvoiceRefused(_("Attach the invoice as a PDF file."))
    if len(pdf) > PDF_MAX_BYTES:
        raise InvoiceRefused(_("The PDF is larger than 5 MB."))
    invoice_number = invoice_number.strip()
    if not invoice_number:
        raise InvoiceRefused(_("Enter the invoice number printed on it."))
    moved = _decide(
        invoice=invoice,
        dst=Status.ISSUED,
        changes={
            "decided_by": staff,
            "pdf": pdf,
            "pdf_name": f"invoice-{invoice_number}.pdf"[:120],
            "invoice_number": invoice_number[:40],
        },
    )
    if moved:
        invoice.refresh_from_db()
        transaction.on_commit(lambda: _notify(invoice))
    return moved


def invoice_decline(*, invoice: InvoiceRequest, staff, reason: str) -> bool:
    """Decline a requested invoice with the reason the user will read; its amount can be asked for again."""
    reason = (reason or "").strip()
    if not reason:
        raise InvoiceRefused(_("Say why: the user reads the reason."))
    moved = _decide(invoice=invoice, dst=Status.DECLINED, changes={"decided_by": staff, "decline_reason": reason[:255]})
    if moved:
        invoice.refresh_from_db()
        transaction.on_commit(lambda: _notify(invoice))
    return moved


def _notify(invoice: InvoiceRequest) -> None:
    """Tell the requester the decision (inbox, e-mail, webhook) in their language, not the deciding
    staff member's; the address written on the request gets the same e-mail when it is another one."""

    def render() -> Message:
        context = {"site": settings.CONSOLE_SITE_NAME, "n": invoice.pk, "amount": cny(invoice.amount_fen)}
        if invoice.status == Status.ISSUED:
            title = _("Your invoice #%(n)s was issued") % context
            subject = _("[%(site)s] Your invoice #%(n)s was issued") % context
            body = (
                _(
                    "Hello,\n\nYour invoice of %(amount)s (request #%(n)s) was issued. Download it from the Billing "
                    "page of %(site)s, under Invoices.\n"
                )
                % context
            )
        else:
            context["reason"] = invoice.decline_reason
            title = _("Your invoice request #%(n)s was declined") % context
            subject = _("[%(site)s] Your invoice request #%(n)s was declined") % context
            body = (
                _(
                    "Hello,\n\nYour invoice request #%(n)s for %(amount)s was declined: %(reason)s\n\nYou can ask "
                    "again for the same amount on the Billing page of %(site)s.\n"
                )
                % context
            )
        return Message(title=title, body=body, mail_subject=subject)

    notify(
        user=invoice.user,
        kind=Kind.INVOICE_DECIDED,
        render=render,
        link="/billing/invoices/",
        data={"invoice_request_id": invoice.pk, "status": invoice.status, "amount_fen": invoice.amount_fen},
    )
    if invoice.email and invoice.email.lower() != invoice.user.email.lower():
        with translation.override(language_of(invoice.user)):
            message = render()
        try:
            send_mail(message.mail_subject, message.body, settings.DEFAULT_FROM_EMAIL, [invoice.email])
        except Exception:
            logger.exception("the invoice e-mail for request %s failed", invoice.pk)
