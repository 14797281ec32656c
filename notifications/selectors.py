"""Reads, always scoped to the user who asks: another user's notification or endpoint is a 404."""

from __future__ import annotations

from django.db.models import QuerySet

from notifications.models import Kind, Notification, NotificationPreference, WebhookDelivery, WebhookEndpoint
from notifications.preferences import DEFAULTS, Channels


def notification_list_for(*, user, unread: bool = False) -> QuerySet[Notification]:
    rows = Notification.objects.filter(user=user)
    return rows.filter(read_at__isnull=True) if unread else rows


def notification_unread_count(*, user) -> int:
    """One COUNT on the (user, read_at, -created_at) index: the bell's figure."""
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def channels_for(*, user_ids: list[int], kind: str) -> dict[int, Channels]:
    """Where ``kind`` goes for each user: the defaults, overlaid with their choices. One query."""
    default = DEFAULTS[kind]
    chosen = {
        p.user_id: Channels(email=p.email, webhook=p.webhook)
        for p in NotificationPreference.objects.filter(user_id__in=user_ids, kind=kind)
    }
    return {user_id: chosen.get(user_id, default) for user_id in user_ids}


def preference_table_for(*, user) -> list[tuple[str, str, Channels]]:
    """Every kind, its label and where it goes for ``user``: the preferences page and the API."""
    chosen = {
        p.kind: Channels(email=p.email, webhook=p.webhook) for p in NotificationPreference.objects.filter(user=user)
    }
    return [(kind.value, str(kind.label), chosen.get(kind.value, DEFAULTS[kind.value])) for kind in Kind]


def webhook_endpoint_list_for(*, user) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(user=user)


def webhook_delivery_list_for(*, user) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(endpoint__user=user).select_related("endpoint")
