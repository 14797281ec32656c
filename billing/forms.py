from __future__ import annotations

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from billing.gateways import gateways_enabled
from billing.payments import InvalidAmount, topup_amount_check, yuan_to_fen


def gateway_choices() -> list[tuple[str, str]]:
    """The enabled gateways as (name, label) choices, the default first."""
    return [(gateway.name, gateway.label) for gateway in gateways_enabled()]


class TopUpForm(forms.Form):
    """A preset button (``preset``, in fen) or a custom amount typed in yuan (``amount``), and the
    payment method among the enabled gateways (``gateway``; the default one when omitted)."""

    gateway = forms.ChoiceField(label=_("Pay with"), required=False, widget=forms.RadioSelect)
    preset = forms.IntegerField(required=False, widget=forms.HiddenInput)
    amount = forms.CharField(
        label=_("Custom amount (¥)"),
        required=False,
        max_length=20,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "placeholder": "200.00", "autocomplete": "off"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["gateway"].choices = gateway_choices()
        if not self.is_bound:
            self.fields["gateway"].initial = self.fields["gateway"].choices[0][0]

    def clean(self):
        data = super().clean()
        preset, amount = data.get("preset"), (data.get("amount") or "").strip()
        try:
            if amount:
                fen = yuan_to_fen(amount)
            elif preset is not None:
                if preset not in settings.BILLING_TOPUP_PRESETS_FEN:
                    raise InvalidAmount(_("Choose one of the amounts shown or type your own."))
                fen = preset
            else:
                raise InvalidAmount(_("Choose an amount or type your own."))
            topup_amount_check(amount_fen=fen)
        except InvalidAmount as exc:
            raise forms.ValidationError({"amount": str(exc)}) from None
        data["amount_fen"] = fen
        data["gateway"] = data.get("gateway") or None
        return data
