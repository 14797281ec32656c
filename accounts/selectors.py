"""Reads for accounts, always scoped to the user who asks: another user's key or token is not found."""

from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import APIToken, SecurityEvent, SSHKey, User


def ssh_key_list_for(*, user: User) -> QuerySet[SSHKey]:
    return SSHKey.objects.filter(user=user)


def api_token_list_for(*, user: User) -> QuerySet[APIToken]:
    return APIToken.objects.filter(user=user).select_related("team")


def security_event_list_for(*, user: User) -> QuerySet[SecurityEvent]:
    """``user``'s own security log, newest first (served by the (user, -created_at) index)."""
    return SecurityEvent.objects.filter(user=user).order_by("-created_at", "-id")
