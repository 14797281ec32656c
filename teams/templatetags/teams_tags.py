"""``account_label``: how staff pages name an account, so a team's reads as the team, not as its
``@teams.invalid`` address. No query: a team's account is known by its address, and its display name
is the team's name (kept in step on rename)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext as _

from teams.services import ACCOUNT_EMAIL_DOMAIN

register = template.Library()


def is_team_account(user) -> bool:
    return bool(getattr(user, "email", "").endswith("@" + ACCOUNT_EMAIL_DOMAIN))


@register.filter
def account_label(user) -> str:
    """A person: their e-mail address. A team's account: the team's name and a "team" badge."""
    if user is None:
        return "—"
    if is_team_account(user):
        return format_html('{} <span class="badge indigo">{}</span>', user.display_name, _("team"))
    return user.email
