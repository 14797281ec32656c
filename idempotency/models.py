from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


class IdempotencyKey(models.Model):
    """One client-chosen key of one user, and the answer its first successful request got.

    The row is claimed (inserted, then locked) in the same transaction as the create it guards, so a
    concurrent twin waits on the unique index and then reads the stored answer; a request that fails
    rolls its claim back, so the key is free for the corrected retry. ``fingerprint`` is the SHA-256 of
    the method, path and body: the same key with another body is refused, never replayed. Rows older
    than ``IDEMPOTENCY_KEY_TTL_S`` (24 h) are ignored and pruned.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=255)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key}]"
