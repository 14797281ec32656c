"""HTML forms for the account pages. They only collect input: the services validate and write."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from accounts.models import APIToken, SSHKey, User


def form_add_service_error(form: forms.Form, error: ValidationError) -> None:
    """Show a service's refusal beside the field it is about (or above the form for any other)."""
    if hasattr(error, "error_dict"):
        for field, errors in error.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, error)


def _terms_label():
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


class SignupTermsForm(forms.Form):
    """allauth's sign-up form adds these fields (``ACCOUNT_SIGNUP_FORM_CLASS``): the box accepting the
    terms of service and the privacy policy in force, required. privacy records the acceptance (its
    receiver of allauth's ``user_signed_up``), with the time and the address."""

    accept_terms = forms.BooleanField(
        label=lazy(_terms_label, SafeString)(),  # links in the label: built when shown, in its language
        required=True,
        error_messages={"required": _("Accept the terms of service and the privacy policy to create an account.")},
    )

    # Last, after whatever allauth's form asks (names it does not have are skipped).
    field_order = ["email", "phone", "password1", "password2", "accept_terms"]

    def signup(self, request, user) -> None:
        """allauth's hook after the user is saved: nothing to add (privacy records the acceptance)."""


class ProfileForm(forms.Form):
    display_name = forms.CharField(
        label=_("Display name"),
        max_length=User._meta.get_field("display_name").max_length,
        required=False,
        help_text=_("How the console greets you. Leave empty to use the first part of your e-mail address."),
    )
    language = forms.ChoiceField(
        label=_("Language"),
        choices=settings.LANGUAGES,
        required=False,  # a form without it keeps the language the user has
        help_text=_(
            "The console's language after you log in, and the language of the e-mails and notifications we send you."
        ),
    )


class SSHKeyForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=SSHKey._meta.get_field("name").max_length,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": _("e.g. work laptop"), "autocomplete": "off"}),
        help_text=_("Optional: without one, the key's comment is used."),
    )
    public_key = forms.CharField(
        label=_("Public key"),
        # The service checks it and gives the specific reason; the form only caps the paste's size.
        max_length=20_000,
        widget=forms.Textarea(
            attrs={"rows": 4, "placeholder": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA… you@laptop", "spellcheck": "false"}
        ),
        help_text=_(
            "Paste the contents of your .pub file, e.g. ~/.ssh/id_ed25519.pub. "
            "No key yet? Run: ssh-keygen -t ed25519. Accepted: Ed25519, ECDSA, RSA of 2048 bits or more."
        ),
    )


class APITokenForm(forms.Form):
    EXPIRY_CHOICES = [
        ("7", _("7 days")),
        ("30", _("30 days")),
        ("90", _("90 days")),
        ("never", _("Never")),
    ]

    name = forms.CharField(
        label=_("Name"),
        max_length=APIToken._meta.get_field("name").max_length,
        widget=forms.TextInput(attrs={"placeholder": _("e.g. CI pipeline"), "autocomplete": "off"}),
        help_text=_("Say where the token is used, so you know which one to revoke."),
    )
    expires = forms.ChoiceField(label=_("Expires"), choices=EXPIRY_CHOICES, initial="30")
    scope = forms.ChoiceField(
        label=_("Access"),
        choices=APIToken.Scope.choices,
        initial=APIToken.Scope.FULL,
        required=False,  # a post without it (an older page, a script) makes a full-access token, as before
        help_text=_("A read-only token can list and read, but cannot launch, stop or spend."),
    )

    team = forms.ChoiceField(
        label=_("Acts for"),
        choices=(),
        required=False,
        help_text=_("A team's token acts on the team's account, and stops working when you leave the team."),
    )

    rate_per_min = forms.IntegerField(
        label=_("Requests a minute"),
        required=False,
        min_value=1,
        widget=forms.NumberInput(attrs={"placeholder": _("your account's limit")}),
        help_text=_("A limit of its own, so a script that loops cannot use up what your other tokens need."),
    )

    def __init__(
        self,
        *args,
        teams: list[dict] | None = None,
        initial_team: int | None = None,
        account_rate: int | None = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        if account_rate is not None:
            self.fields["rate_per_min"].widget.attrs["max"] = account_rate
            self.fields["rate_per_min"].validators.append(MaxValueValidator(account_rate))
        self.teams = teams or []
        self.fields["team"].choices = [("", _("Personal")), *((str(t["id"]), t["name"]) for t in self.teams)]
        if initial_team is not None:
            self.fields["team"].initial = str(initial_team)

    def clean_scope(self) -> str:
        return self.cleaned_data["scope"] or APIToken.Scope.FULL

    def clean_team(self) -> int | None:
        value = self.cleaned_data.get("team") or ""
        return int(value) if value else None

    def expires_at(self):
        value = self.cleaned_data["expires"]
        if value == "never":
            return None
        return timezone.now() + timedelta(days=int(value))
