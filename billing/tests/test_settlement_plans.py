"""The settlement's wallet lock hashes its owners in every plan PostgreSQL may choose for it.

psycopg prepares a statement on its second run on a connection, and PostgreSQL may then plan it once
for any parameters (a generic plan). ``owner_id = ANY(%s)`` is hashed only when the array is a
constant at planning time: in a generic plan each row of the ledger's accounts searched the batch's
10,000 owners one by one, and the tick took 2.5 times as long (``bench/metering.py``). The plans are
read, not timed: the test cannot fail because the machine is busy.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection

from billing.settlement import _LOCK_ACCOUNTS_SQL

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan cache is PostgreSQL's"),
]


def _plan(mode: str, owners: list[int]) -> str:
    """EXPLAIN of the lock statement, prepared as psycopg prepares it, under ``plan_cache_mode = mode``."""
    numbered = iter(("$1", "$2"))
    statement = re.sub(r"%s", lambda _: next(numbered), _LOCK_ACCOUNTS_SQL)
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL plan_cache_mode = {mode}")
        cursor.execute(f"PREPARE settle_lock_plan (bigint[], bigint[]) AS {statement}")
        try:
            # (EXECUTE takes no bound parameters: the arrays go in as literals of integers)
            array = "'{" + ",".join(str(int(owner)) for owner in owners) + "}'"
            cursor.execute(f"EXPLAIN EXECUTE settle_lock_plan ({array}, '{{1,2}}')")
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE settle_lock_plan")


@pytest.mark.parametrize("mode", ["force_generic_plan", "force_custom_plan"])
def test_the_owners_are_hashed_whatever_plan_is_chosen(mode):
    plan = _plan(mode, list(range(1, 10_001)))
    assert "hashed SubPlan" in plan, plan
    assert not re.search(r"owner_id = ANY", plan), plan  # a search of the array for each row
