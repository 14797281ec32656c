from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from billing.payments import InvalidAmount, yuan_to_fen


class BudgetForm(forms.Form):
    """The monthly budget in yuan (empty: no budget) and whether reaching it stops compute."""

    amount = forms.CharField(
        label=_("Monthly budget (¥)"),
        required=False,
        max_length=20,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "placeholder": "500.00", "autocomplete": "off"}),
        help_text=_("Leave empty for no budget."),
    )
    hard_cap = forms.BooleanField(
        label=_("Stop my running instances when the budget is reached (their disks are kept)"), required=False
    )

    def clean_amount(self) -> int | None:
        text = (self.cleaned_data.get("amount") or "").strip()
        if not text:
            return None
        try:
            fen = yuan_to_fen(text)
        except InvalidAmount as exc:
            raise forms.ValidationError(str(exc)) from None
        if fen <= 0:
            raise forms.ValidationError(_("A budget is more than ¥0."))
        return fen


class InstanceCapForm(forms.Form):
    """ "Stop this one after ¥X": an amount in yuan, or empty for no limit."""

    amount = forms.CharField(required=False, max_length=20)

    clean_amount = BudgetForm.clean_amount
