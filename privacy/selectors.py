"""Reads: the legal texts in force, what a user has still to accept, their exports and deletion requests."""

from __future__ import annotations

import time
from datetime import datetime

from django.conf import settings
from django.db.models import QuerySet

from core.memo import process_memo_register
from privacy.models import Acceptance, DataExport, DeletionRequest, DocumentKind, DocumentVersion

# (monotonic time read, {kind: (version id, published at)}): the versions in force change a few times a
# year, and every signed-in request asks, so a process keeps them for PRIVACY_TERMS_CACHE_S seconds
# (publishing forgets them at once in its own process).
_in_force: tuple[float, dict[str, tuple[int, datetime]]] | None = None


@process_memo_register
def in_force_forget() -> None:
    global _in_force
    _in_force = None


def _documents_in_force() -> dict[str, tuple[int, datetime]]:
    global _in_force
    now = time.monotonic()
    if _in_force is not None and now - _in_force[0] < settings.PRIVACY_TERMS_CACHE_S:
        return _in_force[1]
    rows = (
        DocumentVersion.objects.filter(published_at__isnull=False)
        .order_by("kind", "-version")
        .distinct("kind")
        .values_list("kind", "pk", "published_at")
    )
    found = {kind: (pk, published_at) for kind, pk, published_at in rows}
    _in_force = (now, found)
    return found


def documents_in_force_ids() -> dict[str, int]:
    """{kind: id} of the highest published version of each document (kinds never published are left out)."""
    return {kind: pk for kind, (pk, _published) in _documents_in_force().items()}


def document_in_force(*, kind: str) -> DocumentVersion | None:
    pk = documents_in_force_ids().get(kind)
    return DocumentVersion.objects.filter(pk=pk).first() if pk else None


def documents_published_after_joining(*, user) -> list[int]:
    """Ids of the versions in force published after ``user`` joined: the only ones they may still have to
    accept. No query (beyond the process's copy of the versions in force): nearly every request's answer."""
    if user is None or not getattr(user, "pk", None):
        return []
    return [pk for pk, published_at in _documents_in_force().values() if published_at > user.date_joined]


def documents_pending_for(*, user) -> list[DocumentVersion]:
    """The versions in force that ``user`` must still accept, in kind order (terms, then privacy).

    Those not accepted that were published after the user joined. The versions in force at sign-up were
    accepted on the sign-up form (its required box, recorded by ``privacy.signals``), so an account is
    asked again only for what came after; an account older than the texts themselves is asked at its
    next request. (An account made outside the sign-up form, by the admin or a shell, is asked from the
    next version on.)
    """
    newer = documents_published_after_joining(user=user)
    if not newer:
        return []
    accepted = set(Acceptance.objects.filter(user=user, document_id__in=newer).values_list("document_id", flat=True))
    missing = [pk for pk in newer if pk not in accepted]
    if not missing:
        return []
    versions = DocumentVersion.objects.filter(pk__in=missing)
    order = {kind: i for i, kind in enumerate(DocumentKind.values)}
    return sorted(versions, key=lambda v: order.get(v.kind, 99))


def document_versions(*, kind: str) -> QuerySet[DocumentVersion]:
    return DocumentVersion.objects.filter(kind=kind).order_by("-version")


def exports_for(*, user) -> QuerySet[DataExport]:
    return DataExport.objects.filter(user=user).defer("content").order_by("-created_at", "-id")


def deletion_open_for(*, user) -> DeletionRequest | None:
    return DeletionRequest.objects.filter(user=user, status__in=DeletionRequest.OPEN).first()


def deletion_requests_staff() -> QuerySet[DeletionRequest]:
    return DeletionRequest.objects.select_related("user").order_by("-requested_at", "-id")
