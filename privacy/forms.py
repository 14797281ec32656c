"""Privacy's forms: they collect input; the services decide."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from privacy.models import DocumentVersion


class AcceptForm(forms.Form):
    accept = forms.BooleanField(
        label=_("I have read and accept these documents"),
        required=True,
        error_messages={"required": _("Tick the box to accept the documents, or log out.")},
    )


class DeletionRequestForm(forms.Form):
    confirm = forms.BooleanField(
        label=_("I understand that my machines, volumes and deployments will be destroyed with their data"),
        required=True,
        error_messages={"required": _("Tick the box to confirm that you want your account deleted.")},
    )


class DocumentDraftForm(forms.ModelForm):
    class Meta:
        model = DocumentVersion
        fields = ["title_en", "title_zh", "body_en", "body_zh", "changes_en", "changes_zh"]
        widgets = {
            "body_en": forms.Textarea(attrs={"rows": 16}),
            "body_zh": forms.Textarea(attrs={"rows": 16}),
            "changes_en": forms.Textarea(attrs={"rows": 3}),
            "changes_zh": forms.Textarea(attrs={"rows": 3}),
        }
        help_texts = {
            "body_en": _("Plain text: a blank line starts a new paragraph."),
            "changes_en": _("Shown to users when they are asked to accept this version."),
        }
