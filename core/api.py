"""The REST API's shared parts: one error format, pagination, the JSON 404 for unknown API paths.

Every 4xx answers with the same body, so clients need one parser::

    {"error": {"code": "not_found", "message": "Not found.", "fields": {...}}}

``code`` is machine-readable and stable; ``message`` is for people and is translated; ``fields``
appears on validation errors and maps each field to its messages.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.utils.translation import gettext as _
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 100


def _first_message(detail: Any) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and detail:
        return _first_message(next(iter(detail.values())))
    return str(detail)


def error_body(*, code: str, message: str, fields: dict | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        if isinstance(detail, dict):
            non_field = detail.get("non_field_errors")
            message = _first_message(non_field) if non_field else _("Some fields are not valid.")
            fields = {key: value for key, value in detail.items() if key != "non_field_errors"}
        else:
            message, fields = _first_message(detail), {}
        codes = exc.get_codes()
        code = "invalid"
        if isinstance(codes, dict) and "non_field_errors" in codes:
            code = _first_message(codes["non_field_errors"]) or "invalid"
        response.data = error_body(code=code, message=message, fields=fields or None)
    elif isinstance(exc, exceptions.APIException):
        code = exc.get_codes()
        code = code if isinstance(code, str) else exc.default_code
        response.data = error_body(code=code, message=_first_message(exc.detail))
    return response


class ServiceError(exceptions.APIException):
    """A business rule refused the request; services raise domain errors that views map to this."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def json_not_found(request, exception=None) -> JsonResponse:
    return JsonResponse(error_body(code="not_found", message=_("Not found.")), status=404)
