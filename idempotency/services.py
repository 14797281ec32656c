"""Claim a key, store the answer, prune old keys. Run inside the request's transaction (see api.py)."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from idempotency.models import IdempotencyKey


def _ttl() -> timedelta:
    return timedelta(seconds=getattr(settings, "IDEMPOTENCY_KEY_TTL_S", 24 * 3600))


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    """The same request gives the same digest whatever the key order of its JSON body."""
    canonical = json.dumps([method, path, body], sort_keys=True, cls=DjangoJSONEncoder, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotency_key_claim(*, user, key: str, method: str, path: str, fingerprint: str) -> IdempotencyKey:
    """The key's row, locked until the caller's transaction ends.

    ``INSERT ... ON CONFLICT DO NOTHING`` then ``SELECT ... FOR UPDATE``: a concurrent request with
    the same key blocks on the unique index until the first one's transaction ends, then finds its row
    (with the stored answer) or, if it rolled back, claims the key itself. An expired row is deleted
    first, so a key is reusable after the TTL.
    """
    assert transaction.get_connection().in_atomic_block, "claim a key inside the request's transaction"
    IdempotencyKey.objects.filter(user=user, key=key, created_at__lt=timezone.now() - _ttl()).delete()
    IdempotencyKey.objects.bulk_create(
        [IdempotencyKey(user=user, key=key, method=method, path=path[:255], fingerprint=fingerprint)],
        ignore_conflicts=True,
    )
    return IdempotencyKey.objects.select_for_update().get(user=user, key=key)


def idempotency_key_store(*, record: IdempotencyKey, status_code: int, body: Any) -> None:
    """Keep the answer that the key's later repeats will get."""
    record.status_code = status_code
    record.response_body = body
    record.save(update_fields=["fingerprint", "status_code", "response_body"])


def idempotency_keys_prune() -> int:
    """Delete keys past their TTL; returns how many. Repeating it is harmless."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - _ttl()).delete()
    return deleted
