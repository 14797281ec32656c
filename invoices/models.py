"""Invoice requests (发票申请): a user asks for an invoice of money they paid; staff issue it or decline.

An invoice covers either one paid top-up (开票 by top-up) or the paid usage of one calendar month (by
consumption). Trial credit is never invoiced: it was never paid. ``invoices.services`` keeps the
one rule that matters to the tax office: no paid fen is invoiced twice.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from billing.models import TopUpOrder
from core.statemachine import transition_table


class InvoiceRequest(models.Model):
    """One invoice asked for; its status moves only along ``TRANSITIONS`` (``invoices.services``)."""

    class Kind(models.TextChoices):
        TOPUP = "topup", _("A paid top-up")  # the money of one top-up order
        USAGE = "usage", _("A month's usage")  # what the paid balance was charged in one month

    class TitleType(models.TextChoices):
        PERSONAL = "personal", _("Personal")  # 个人: a name, no tax number
        COMPANY = "company", _("Company")  # 企业: the company's name and its tax number

    class Status(models.TextChoices):
        REQUESTED = "requested", _("Requested")  # waiting in the staff queue
        ISSUED = "issued", _("Issued")  # the PDF is attached; the user can download it
        DECLINED = "declined", _("Declined")  # staff said why; the amount can be asked for again

    TRANSITIONS = transition_table(
        {Status.REQUESTED: {Status.ISSUED, Status.DECLINED}, Status.ISSUED: set(), Status.DECLINED: set()}
    )
    BADGES = {Status.REQUESTED: "yellow", Status.ISSUED: "green", Status.DECLINED: "red"}

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="invoice_requests")
    kind = models.CharField(_("covers"), max_length=10, choices=Kind.choices)
    order = models.ForeignKey(
        TopUpOrder, null=True, blank=True, on_delete=models.PROTECT, related_name="invoice_requests"
    )
    month = models.DateField(_("month"), null=True, blank=True)  # the first day of the month, for USAGE
    amount_fen = models.PositiveBigIntegerField(_("amount (fen)"))
    title_type = models.CharField(_("title type"), max_length=10, choices=TitleType.choices)
    title = models.CharField(_("invoice title"), max_length=200)
    tax_number = models.CharField(_("tax number"), max_length=20, blank=True)
    email = models.EmailField(_("e-mail"))
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.REQUESTED)
    created_at = models.DateTimeField(_("requested"), default=timezone.now)
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decline_reason = models.CharField(_("reason"), max_length=255, blank=True)
    invoice_number = models.CharField(_("invoice number"), max_length=40, blank=True)
    # The issued PDF, kept in the database: private by construction (served only to its owner and
    # staff), backed up with the ledger it documents, and shared by every web process without a volume.
    pdf = models.BinaryField(null=True, blank=True, editable=False)
    pdf_name = models.CharField(max_length=120, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("invoice request")
        verbose_name_plural = _("invoice requests")
        indexes = [models.Index(fields=["status", "created_at"], name="invoice_queue")]
        constraints = [
            models.CheckConstraint(condition=models.Q(amount_fen__gt=0), name="invoice_amount_positive"),
            models.CheckConstraint(
                condition=(models.Q(kind="topup", order__isnull=False, month__isnull=True))
                | (models.Q(kind="usage", order__isnull=True, month__isnull=False)),
                name="invoice_covers_one_thing",
            ),
            models.CheckConstraint(
                condition=~models.Q(title_type="company") | ~models.Q(tax_number=""),
                name="invoice_company_has_tax_number",
            ),
        ]

    def __str__(self) -> str:
        return f"Invoice request #{self.pk} ({self.amount_fen} fen, {self.status})"

    @property
    def badge(self) -> str:
        return self.BADGES.get(self.status, "")
