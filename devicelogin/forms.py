from django import forms
from django.utils.translation import gettext_lazy as _


class UserCodeForm(forms.Form):
    code = forms.CharField(label=_("Code shown in your terminal"), max_length=12)
