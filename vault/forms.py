"""Forms of the Secrets page. They validate shapes; the services decide (name rules, size, count)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

_VALUE_ATTRS = {"rows": 3, "autocomplete": "off", "spellcheck": "false", "class": "mono", "autocapitalize": "off"}


class SecretCreateForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=64,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "WANDB_API_KEY", "autocomplete": "off", "class": "mono"}),
        help_text=_("Capital letters, digits and _: the file /run/console-secrets/NAME and, if you ask, the variable."),
    )
    value = forms.CharField(
        label=_("Value"),
        strip=False,
        max_length=settings.VAULT_VALUE_MAX_BYTES,
        widget=forms.Textarea(attrs=_VALUE_ATTRS),
        help_text=_("Shown only now: once saved, only its name is shown."),
    )


class SecretValueForm(forms.Form):
    value = forms.CharField(
        label=_("New value"),
        strip=False,
        max_length=settings.VAULT_VALUE_MAX_BYTES,
        widget=forms.Textarea(attrs=_VALUE_ATTRS),
    )


class RegistryCredentialForm(forms.Form):
    host = forms.CharField(
        label=_("Registry"),
        max_length=255,
        widget=forms.TextInput(
            attrs={"placeholder": "registry.example.com:5000", "autocomplete": "off", "class": "mono"}
        ),
    )
    username = forms.CharField(
        label=_("User name"), max_length=255, widget=forms.TextInput(attrs={"autocomplete": "off"})
    )
    password = forms.CharField(
        label=_("Password or token"),
        max_length=8192,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=_("Kept encrypted; only importing and pulling your images read it."),
    )
