"""HTML forms of the notification pages. They only collect input: the services validate and write."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _


class WebhookEndpointForm(forms.Form):
    url = forms.CharField(
        label=_("Endpoint URL"),
        max_length=500,
        widget=forms.URLInput(attrs={"placeholder": "https://example.com/hooks/console", "autocomplete": "off"}),
        help_text=_("We POST a signed JSON event there for each notification whose webhook box is ticked."),
    )
