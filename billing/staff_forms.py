"""The staff adjustment form: a user by e-mail, an amount in yuan (two decimals) and a reason."""

from __future__ import annotations

import re
import uuid

from django import forms
from django.contrib.auth import get_user_model
from django.utils.translation import gettext_lazy as _

_AMOUNT = re.compile(r"^(?P<sign>[+-]?)(?P<yuan>\d{1,9})(?:\.(?P<cents>\d{1,2}))?$")


def yuan_to_fen(text: str) -> int:
    """``"-12.5"`` → ``-1250``: parsed as text, never through float. Raises ``ValueError``."""
    match = _AMOUNT.match(text.strip().replace(",", "").replace("¥", ""))
    if not match:
        raise ValueError(text)
    fen = int(match["yuan"]) * 100 + int((match["cents"] or "0").ljust(2, "0"))
    return -fen if match["sign"] == "-" else fen


class BalanceAdjustForm(forms.Form):
    email = forms.EmailField(label=_("User's e-mail"))
    amount = forms.CharField(
        label=_("Amount (¥)"),
        max_length=16,
        help_text=_("Positive credits the user's paid balance, negative debits it; at most 2 decimals."),
    )
    reason = forms.CharField(label=_("Reason"), max_length=255, help_text=_("Shown to the user in their history."))
    key = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("initial", {}).setdefault("key", uuid.uuid4().hex)
        super().__init__(*args, **kwargs)

    def clean_email(self):
        email = self.cleaned_data["email"].strip().lower()
        user = get_user_model().objects.filter(email__iexact=email).first()
        if user is None:
            raise forms.ValidationError(_("No user has this e-mail address."))
        self.cleaned_data["user"] = user
        return email

    def clean_amount(self):
        try:
            fen = yuan_to_fen(self.cleaned_data["amount"])
        except ValueError:
            raise forms.ValidationError(_("Enter an amount like 12.50 or -3 (at most two decimals).")) from None
        if fen == 0:
            raise forms.ValidationError(_("The amount cannot be zero."))
        return fen

    def clean_reason(self):
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError(_("Say why: the reason is kept with the adjustment."))
        return reason

    def clean_key(self):
        key = self.cleaned_data["key"]
        if not re.fullmatch(r"[0-9a-f]{32}", key):
            raise forms.ValidationError(_("Reload the page and try again."))
        return key


class RefundForm(forms.Form):
    """Staff refund of a paid top-up: the order, the amount in yuan (a part or all), and the reason.

    ``key`` is drawn when the form is shown, so a double submit refunds once.
    """

    order = forms.IntegerField(label=_("Top-up order #"), min_value=1)
    amount = forms.CharField(
        label=_("Amount (¥)"), max_length=16, help_text=_("All that remains of the order, or a part of it.")
    )
    reason = forms.CharField(label=_("Reason"), max_length=255, help_text=_("Shown to the user with the refund."))
    key = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("initial", {}).setdefault("key", uuid.uuid4().hex)
        super().__init__(*args, **kwargs)

    def clean_amount(self):
        try:
            fen = yuan_to_fen(self.cleaned_data["amount"])
        except ValueError:
            raise forms.ValidationError(_("Enter an amount like 12.50 (at most two decimals).")) from None
        if fen <= 0:
            raise forms.ValidationError(_("A refund is a positive amount."))
        return fen

    def clean_reason(self):
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError(_("Say why the money goes back."))
        return reason

    def clean_key(self):
        key = self.cleaned_data["key"]
        if not re.fullmatch(r"[0-9a-f]{32}", key):
            raise forms.ValidationError(_("Reload the page and try again."))
        return key
