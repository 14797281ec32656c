"""Identity's forms: shapes only. The services check everything again and say what is wrong."""

from __future__ import annotations

from django import forms
from django.urls import reverse
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _


def _terms_label() -> str:
    """The box's label links the texts in force (served by the privacy app, named by its URLs)."""
    return format_html(
        str(
            _(
                'I accept the <a href="{}" target="_blank" rel="noopener">terms of service</a> and the '
                '<a href="{}" target="_blank" rel="noopener">privacy policy</a>'
            )
        ),
        reverse("privacy_document", args=["terms"]),
        reverse("privacy_document", args=["privacy"]),
    )


class PhoneForm(forms.Form):
    number = forms.CharField(
        label=_("Mobile number"),
        max_length=32,
        widget=forms.TextInput(
            attrs={"autocomplete": "tel", "inputmode": "tel", "placeholder": "138 0013 8000", "autofocus": True}
        ),
        help_text=_("A mainland China mobile number. We text you a six-digit code."),
    )


class PhoneCodeForm(forms.Form):
    number = forms.CharField(widget=forms.HiddenInput, max_length=32)
    code = forms.CharField(
        label=_("Code"),
        max_length=10,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "pattern": "[0-9 ]*", "autofocus": True}
        ),
    )


class PhoneLoginCodeForm(PhoneCodeForm):
    """The log-in page's code: that page signs up a number it does not know (and does not say so), so the
    terms are accepted here, as on the e-mail sign-up form; privacy records the acceptance of a new
    account (``user_signed_up``)."""

    accept_terms = forms.BooleanField(
        label=lazy(_terms_label, SafeString)(),
        required=True,
        error_messages={"required": _("Accept the terms of service and the privacy policy to continue.")},
    )


class IndividualForm(forms.Form):
    name = forms.CharField(label=_("Full name"), max_length=50, help_text=_("As on your resident ID card."))
    id_number = forms.CharField(
        label=_("Resident ID number"),
        max_length=24,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text=_("18 characters. It is checked with the authority's records and not kept by the console."),
    )


class OrganisationForm(forms.Form):
    company_name = forms.CharField(label=_("Registered name"), max_length=200)
    credit_code = forms.CharField(
        label=_("Unified social credit code"),
        max_length=24,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text=_("The 18-character code on the business licence."),
    )
    document = forms.FileField(
        label=_("Business licence"),
        help_text=_("A PDF, PNG or JPEG scan. Staff review it, then it is deleted."),
        widget=forms.ClearableFileInput(attrs={"accept": ".pdf,.png,.jpg,.jpeg"}),
    )


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", _("Approve")), ("reject", _("Reject"))])
    reason = forms.CharField(label=_("Reason"), max_length=300, required=False)
