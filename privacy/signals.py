"""Sign-up's acceptance: the sign-up form's required box covers the texts in force, recorded here.

allauth sends ``user_signed_up`` inside the sign-up's request, after the user is saved; accounts (below
privacy) owns the form and its box, privacy owns what an acceptance is.
"""

from __future__ import annotations

from allauth.account.signals import user_signed_up
from django.dispatch import receiver

from accounts.client import request_client
from privacy.services import documents_in_force_accept


@receiver(user_signed_up, dispatch_uid="privacy.signed_up_accepts")
def on_signed_up(sender, request, user, **kwargs) -> None:
    documents_in_force_accept(user=user, ip=request_client(request)["ip"])
