"""The invoice request form and the staff decision forms."""

from __future__ import annotations

from datetime import date

from django import forms
from django.utils.translation import gettext_lazy as _

from billing.payments import InvalidAmount, yuan_to_fen
from core.formatting import cny
from invoices.models import InvoiceRequest


class InvoiceRequestForm(forms.Form):
    """What to invoice (a paid top-up or a month, among those with something left), how much, and to whom."""

    covers = forms.ChoiceField(label=_("Invoice for"))
    amount = forms.CharField(
        label=_("Amount (¥)"),
        max_length=20,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off"}),
    )
    title_type = forms.ChoiceField(
        label=_("Title type"), choices=InvoiceRequest.TitleType.choices, widget=forms.RadioSelect, initial="personal"
    )
    title = forms.CharField(
        label=_("Invoice title"), max_length=200, help_text=_("Your name, or the company's full name.")
    )
    tax_number = forms.CharField(
        label=_("Taxpayer number"),
        max_length=30,
        required=False,
        help_text=_("Companies only: the unified social credit code."),
    )
    email = forms.EmailField(label=_("Send to e-mail"))

    def __init__(self, *args, orders=(), months=(), **kwargs):
        super().__init__(*args, **kwargs)
        choices = [
            (
                f"order:{order.pk}",
                _("Top-up #%(n)s of %(date)s — %(left)s left to invoice")
                % {"n": order.pk, "date": f"{order.paid_at or order.created_at:%Y-%m-%d}", "left": cny(fen)},
            )
            for order, fen in orders
        ]
        choices += [
            (
                f"month:{month:%Y-%m}",
                _("Usage in %(month)s — %(left)s left to invoice") % {"month": f"{month:%Y-%m}", "left": cny(fen)},
            )
            for month, fen in months
        ]
        self.fields["covers"].choices = choices

    def clean_amount(self):
        try:
            return yuan_to_fen(self.cleaned_data["amount"])
        except InvalidAmount as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        covers = data.get("covers") or ""
        kind, _sep, value = covers.partition(":")
        data["order_id"], data["month"] = None, None
        if kind == "order" and value.isdigit():
            data["order_id"] = int(value)
        elif kind == "month":
            year, _sep, month = value.partition("-")
            data["month"] = date(int(year), int(month), 1)
        if data.get("title_type") == InvoiceRequest.TitleType.COMPANY and not (data.get("tax_number") or "").strip():
            self.add_error("tax_number", _("A company invoice needs the company's taxpayer number."))
        return data


class InvoiceIssueForm(forms.Form):
    invoice_number = forms.CharField(label=_("Invoice number"), max_length=40)
    pdf = forms.FileField(label=_("Invoice PDF"))


class InvoiceDeclineForm(forms.Form):
    reason = forms.CharField(label=_("Reason"), max_length=255, help_text=_("The user reads it."))
