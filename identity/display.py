"""How allauth names a person in its messages ("Successfully signed in as …")."""

from __future__ import annotations


def user_display(user) -> str:
    """The e-mail address, as allauth says it; for an account made by mobile number, whose address is a
    placeholder under ``.invalid`` that means nothing to its owner, the masked number it is known by."""
    email = getattr(user, "email", "") or ""
    if email.endswith(".invalid"):
        return getattr(user, "short_name", "") or email
    return email
