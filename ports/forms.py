from __future__ import annotations

from datetime import timedelta

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ports.models import MAX_PORT

EXPIRY_CHOICES = [
    ("", _("Never")),
    ("1", _("In 1 hour")),
    ("24", _("In 1 day")),
    ("168", _("In 7 days")),
]


class PortForm(forms.Form):
    port = forms.IntegerField(label=_("Port"), min_value=1, max_value=MAX_PORT)
    name = forms.CharField(label=_("Name"), max_length=64, required=False)


class ShareForm(forms.Form):
    label = forms.CharField(label=_("For"), max_length=64, required=False)
    expires_in_hours = forms.TypedChoiceField(
        label=_("Expires"), choices=EXPIRY_CHOICES, coerce=int, empty_value=None, required=False
    )

    def expires_at(self):
        hours = self.cleaned_data.get("expires_in_hours")
        return timezone.now() + timedelta(hours=hours) if hours else None
