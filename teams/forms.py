"""HTML forms for the team pages. They only collect input: the services validate and write."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from billing.payments import InvalidAmount, yuan_to_fen
from teams.models import Role, Team
from teams.services import MONEY_IN, MONEY_OUT


class TeamForm(forms.Form):
    name = forms.CharField(
        label=_("Team name"),
        max_length=Team._meta.get_field("name").max_length,
        widget=forms.TextInput(attrs={"placeholder": _("e.g. Vision Lab"), "autocomplete": "off"}),
    )


class InviteForm(forms.Form):
    email = forms.EmailField(
        label=_("E-mail address"), widget=forms.EmailInput(attrs={"placeholder": "name@example.com"})
    )
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices)


class LimitsForm(forms.Form):
    """A member's limits: a monthly spend in yuan and a number of cards; empty lifts the limit."""

    spend_limit = forms.CharField(
        label=_("Monthly spend limit (¥)"),
        required=False,
        max_length=20,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "placeholder": _("no limit"), "autocomplete": "off"}),
    )
    gpu_limit = forms.IntegerField(
        label=_("GPU cards at once"),
        required=False,
        min_value=0,
        max_value=10_000,
        widget=forms.NumberInput(attrs={"placeholder": _("no limit")}),
    )

    def clean_spend_limit(self) -> int | None:
        text = (self.cleaned_data.get("spend_limit") or "").strip()
        if not text:
            return None
        try:
            fen = yuan_to_fen(text)
        except InvalidAmount as exc:
            raise forms.ValidationError(str(exc)) from None
        if fen < 0:
            raise forms.ValidationError(_("The spend limit cannot be negative."))
        return fen


class MoneyMoveForm(forms.Form):
    """Move paid money into the team (from one's own wallet) or out of it (owners). ``key`` is a fresh
    id rendered with the form, so a double-clicked or resubmitted form moves the money once."""

    direction = forms.ChoiceField(
        label=_("Direction"),
        choices=[(MONEY_IN, _("Into the team, from my wallet")), (MONEY_OUT, _("Out of the team, into my wallet"))],
        initial=MONEY_IN,
    )
    amount = forms.CharField(
        label=_("Amount (¥)"),
        max_length=20,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "placeholder": "100.00", "autocomplete": "off"}),
    )
    key = forms.CharField(max_length=100, widget=forms.HiddenInput)

    def clean_amount(self) -> int:
        try:
            fen = yuan_to_fen((self.cleaned_data.get("amount") or "").strip())
        except InvalidAmount as exc:
            raise forms.ValidationError(str(exc)) from None
        if fen <= 0:
            raise forms.ValidationError(_("Enter an amount above zero."))
        return fen
