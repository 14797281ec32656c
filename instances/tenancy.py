"""Tenants as hosts isolate them: each account's own Unix uid and host uid range.

Engines that run containers need every account in a uid range of its own (rootful podman maps the
container's uid 0 to the range's first uid; Slurm jobs run as the tenant's own Unix user, with its
own subordinate range for rootless podman). Hosts' own tools hand out overlapping ranges, so the
console allocates them: one row per account, numbered by the database's sequence, never reused, so
two accounts never share a range, whatever the engine and however many hosts it has.

    INSTANCES_TENANT_UID_START      the first tenant's Unix uid (then one per tenant)
    INSTANCES_TENANT_SUBUID_START   the first tenant's host uid range (then INSTANCES_TENANT_SUBUID_COUNT apart)
"""

from __future__ import annotations

from django.conf import settings

from instances.models import TenantRange
from providers.base import Tenant


def tenant_for(*, account_id: int) -> Tenant:
    """The account's tenant, allocated at its first machine (a repeat, or a race, returns the same row)."""
    row, _created = TenantRange.objects.get_or_create(account_id=account_id)
    return tenant_from_range(row)


def tenant_from_range(row: TenantRange) -> Tenant:
    """The uid and range a stored allocation stands for (pure: settings fix the layout)."""
    count = settings.INSTANCES_TENANT_SUBUID_COUNT
    return Tenant(
        name=f"{settings.INSTANCES_TENANT_USER_PREFIX}{row.pk}",
        uid=settings.INSTANCES_TENANT_UID_START + row.pk,
        uid_base=settings.INSTANCES_TENANT_SUBUID_START + row.pk * count,
        uid_count=count,
    )
