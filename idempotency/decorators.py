"""The ``Idempotency-Key`` header on POSTs that create or spend: a decorator for DRF view methods.

Same key and same body: the first answer again (status and body, plus ``Idempotent-Replayed: true``),
and nothing is created twice, even for requests that arrive together. Same key, another body: 409
``idempotency_key_reused``. Only successful answers are kept: a refused request (4xx) leaves the key
free, so the client can correct its request and retry with the same key.
"""

from __future__ import annotations

import functools
import re

from django.db import transaction
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from core.drf import ServiceError
from idempotency import services

HEADER = "Idempotency-Key"
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")

#: Add to the ``parameters`` of every operation the decorator guards.
IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    pattern=r"^[\x21-\x7e]{1,255}$",
    description="Any unique string of up to 255 printable ASCII characters (a UUID is a good choice). "
    "A retry with the same key and body returns the first answer and creates nothing; the same key with "
    "another body is a 409 `idempotency_key_reused`. Keys are kept for 24 hours.",
)


class IdempotencyKeyReused(ServiceError):
    default_code = "idempotency_key_reused"


def idempotent(method=None, *, secret_fields: tuple[str, ...] = ()):
    """Guard a DRF view method (``create``, ``post`` or a POST ``@action``) with the header.

    ``secret_fields`` are top-level fields of the answer shown once (a deployment's API key): they are
    not stored, so a replay answers them as null; the first answer is the only one that has them.
    """
    if method is None:
        return functools.partial(idempotent, secret_fields=secret_fields)

    @functools.wraps(method)
    def wrapper(view, request, *args, **kwargs):
        key = request.headers.get(HEADER)
        if key is None or request.method != "POST":
            return method(view, request, *args, **kwargs)
        if not _KEY.match(key):
            raise ValidationError({HEADER: [_("Use 1 to 255 printable ASCII characters, without spaces.")]})
        fingerprint = services.request_fingerprint(method=request.method, path=request.path, body=request.data)
        with transaction.atomic():
            record = services.idempotency_key_claim(
                user=request.user, key=key, method=request.method, path=request.path, fingerprint=fingerprint
            )
            if record.status_code is not None:
                if record.fingerprint != fingerprint:
                    raise IdempotencyKeyReused(
                        _("This Idempotency-Key was used with another request; use a new key for a new request.")
                    )
                return Response(
                    record.response_body, status=record.status_code, headers={"Idempotent-Replayed": "true"}
                )
            record.fingerprint = fingerprint
            response = method(view, request, *args, **kwargs)
            if 200 <= response.status_code < 300:
                body = response.data
                if secret_fields and isinstance(body, dict):
                    body = {**body, **dict.fromkeys(secret_fields)}
                services.idempotency_key_store(record=record, status_code=response.status_code, body=body)
            return response

    return wrapper
