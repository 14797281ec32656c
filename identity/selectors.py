"""Identity's reads, each scoped to the person who asks."""

from __future__ import annotations

from django.db.models import QuerySet

from identity.models import PhoneNumber, RealNameVerification

Status = RealNameVerification.Status


def phone_number_for(*, user) -> PhoneNumber | None:
    return PhoneNumber.objects.filter(user=user).first()


def phone_user_get(*, number: str):
    """The account whose verified number this is, or None."""
    row = PhoneNumber.objects.select_related("user").filter(number=number).first()
    return row.user if row else None


def real_name_for(*, user) -> RealNameVerification | None:
    """The account's live verification (pending or verified), else its latest rejected one, else None."""
    rows = RealNameVerification.objects.filter(user=user)
    return rows.filter(status__in=[Status.PENDING, Status.VERIFIED]).first() or rows.order_by("-created_at").first()


def real_name_verified(*, user) -> bool:
    return RealNameVerification.objects.filter(user=user, status=Status.VERIFIED).exists()


def real_name_queue() -> QuerySet[RealNameVerification]:
    """Organisations waiting for staff, oldest first (the staff page)."""
    return (
        RealNameVerification.objects.filter(status=Status.PENDING, kind=RealNameVerification.Kind.ORGANISATION)
        .select_related("user")
        .order_by("created_at")
    )


def real_name_decided(*, limit: int = 20) -> list[RealNameVerification]:
    """The latest organisations staff decided, for the staff page's history."""
    return list(
        RealNameVerification.objects.filter(kind=RealNameVerification.Kind.ORGANISATION, decided_at__isnull=False)
        .select_related("user", "reviewed_by")
        .order_by("-decided_at")[:limit]
    )
