"""Who and what a statement's usage lines are for (``billing.hooks.usage_attribution``).

Billing knows a meter by its ref (``instances.skus``: ``instance:<id>:gpu``, ``instance:<id>:disk``);
this names the instance and the person who launched it (``Instance.created_by``), so a team's statement
breaks its usage down per member and per instance. One query for all the refs of a statement.
"""

from __future__ import annotations

import uuid

from instances.models import Instance


def usage_attribution(*, user, refs: list[str]) -> dict[str, dict]:
    """``{ref: {"resource_key", "resource_label", "member_id", "member_label"}}`` for ``user``'s instances."""
    wanted: dict[str, uuid.UUID] = {}
    for ref in refs:
        kind, _, rest = ref.partition(":")
        if kind != "instance":
            continue
        try:
            wanted[ref] = uuid.UUID(rest.partition(":")[0])
        except ValueError:
            continue
    if not wanted:
        return {}
    rows = {
        row["pk"]: row
        for row in Instance.objects.filter(owner=user, pk__in=set(wanted.values())).values(
            "pk", "name", "created_by_id", "created_by__display_name", "created_by__email"
        )
    }
    found = {}
    for ref, pk in wanted.items():
        row = rows.get(pk)
        if row is None:
            continue
        email = row["created_by__email"] or ""
        found[ref] = {
            "resource_key": f"instance:{pk}",
            "resource_label": row["name"],
            "member_id": row["created_by_id"],
            "member_label": row["created_by__display_name"] or email.split("@", 1)[0],
        }
    return found
