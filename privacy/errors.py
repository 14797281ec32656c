"""The refusals privacy's services raise: each a sentence a user can act on (``core.errors.Refusal``)."""

from __future__ import annotations

from core.errors import Refusal


class PrivacyError(Refusal):
    code = "privacy_refused"


class ExportRefused(PrivacyError):
    code = "export_refused"


class DeletionRefused(PrivacyError):
    code = "deletion_refused"


class DocumentRefused(PrivacyError):
    code = "document_refused"
