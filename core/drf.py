"""The REST API's shared parts: one error format, pagination, the JSON 404 for unknown API paths.

Every 4xx answers with the same body, so clients need one parser::

    {"error": {"code": "not_found", "message": "Not found.", "fields": {...}}}

``code`` is machine-readable and stable; ``message`` is for people and is translated; ``fields``
appears on validation errors and maps each field to its messages.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, permissions, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Pagination(PageNumberPagination):
    """Page-number pagination that refuses what it cannot honour, with a 400 naming the parameter.

    DRF's own quietly falls back to the default page size for ``page_size=abc`` and clamps
    ``page_size=1000``: a client then reads a page it did not ask for. A page past the end stays
    DRF's 404 (``Invalid page.``), documented on every list.
    """

    page_size_query_param = "page_size"
    max_page_size = 100

    def _positive_int(self, request, name: str, *, maximum: int | None = None) -> int | None:
        raw = request.query_params.get(name)
        if raw is None:
            return None
        if not raw.isascii() or not raw.isdigit() or int(raw) < 1 or (maximum is not None and int(raw) > maximum):
            if maximum is None:
                message = _("Give a whole number of 1 or more.")
            else:
                message = _("Give a whole number from 1 to %(max)d.") % {"max": maximum}
            raise exceptions.ValidationError({name: [message]})
        return int(raw)

    def paginate_queryset(self, queryset, request, view=None):
        self._positive_int(request, self.page_query_param)
        self._positive_int(request, self.page_size_query_param, maximum=self.max_page_size)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
            elif parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
        return parameters


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
        # Its message, when it has one, says why (a role that may not act): the caller sees it.
        exc = exceptions.PermissionDenied(detail=str(exc) or None)
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


class SlugRelatedField(serializers.SlugRelatedField):
    """DRF's, refusing a NUL character as "does not exist" before it reaches PostgreSQL (which would
    fail the query: a 500 for what is only a wrong name), and refusing an empty slug even where null is
    allowed: DRF reads "" as null (an HTML form's empty choice), but a JSON client that sends "" named
    no row, and the schema says a slug has at least one character."""

    default_error_messages = {
        **serializers.SlugRelatedField.default_error_messages,
        "blank": gettext_lazy("This field may not be blank."),
    }

    def run_validation(self, data=serializers.empty):
        if data == "":
            self.fail("blank")
        return super().run_validation(data)

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", ""))
        return super().to_internal_value(data)


class PersonalTokenForChanges(permissions.BasePermission):
    """Changes to a person's own settings (their notifications' receivers and preferences) are refused
    to an API token scoped to a team, with a 403 ``team_token``; reads are not.

    Such a token acts for the team (``request.principal`` is the team's account) and is often handed to
    the team's CI: it must not reach what belongs to its maker alone, where it could, say, send the
    maker's personal news to a receiver of its own. The same answer as the account's credentials give
    it (``accounts.api.PersonalCredentialsOnly``). The token is read by attribute (``team_id``), so the
    apps below accounts need not import it.
    """

    message = gettext_lazy(
        "A token scoped to a team cannot change your personal settings: use a personal token or the console."
    )
    code = "team_token"

    def has_permission(self, request, view) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return getattr(request.auth, "team_id", None) is None


class ServiceError(exceptions.APIException):
    """A business rule refused the request; services raise domain errors that views map to this."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


@csrf_exempt  # it changes nothing: a POST to no endpoint is a JSON 404, not the CSRF page's HTML 403
def json_not_found(request, exception=None) -> JsonResponse:
    return JsonResponse(error_body(code="not_found", message=_("Not found.")), status=404)


# --- The error format in the schema ------------------------------------------------------------------

#: The one error body, as an OpenAPI component every documented 4xx refers to.
ERROR_COMPONENT = {
    "type": "object",
    "description": "Every 4xx answer has this body.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Machine-readable and stable, e.g. not_found."},
                "message": {"type": "string", "description": "For people, in the request's language."},
                "fields": {
                    "type": "object",
                    "description": "On validation errors: each field's messages (nested for nested fields).",
                    "additionalProperties": True,
                },
            },
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}

_ERROR_DESCRIPTIONS = {
    "400": "The request is not valid: `fields` says which field and why.",
    "401": "No valid credentials (a missing, expired or revoked token).",
    "403": "Authenticated but not allowed.",
    "404": "No such object (or it belongs to someone else), or a page past the end.",
    "405": "This method is not allowed here.",
    "406": "The Accept header asks for a type this endpoint cannot produce.",
    "409": "A business rule refused the request: `code` says which.",
    "415": "The request body's media type is not supported.",
    "429": "Too many requests: wait the seconds the Retry-After header gives.",
}
_ERROR_REF = {"$ref": "#/components/schemas/Error"}


def _error_response(status_code: str, description: str | None = None) -> dict:
    response = {
        "description": description or _ERROR_DESCRIPTIONS.get(status_code, "Refused."),
        "content": {"application/json": {"schema": _ERROR_REF}},
    }
    if status_code == "429":
        response["headers"] = {
            "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."}
        }
    return response


_NO_NUL = "^[^\\x00]*$"
# A required text field (minLength 1) is trimmed before it is checked, so it needs a character that is
# not white space: "   " is as blank as "".
_NOT_BLANK = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"


def _forbid_nul(node) -> None:
    """Text the API reads may not hold NUL (DRF refuses it; PostgreSQL cannot store it), and text it
    trims may not be only white space: say so."""
    if isinstance(node, dict):
        if node.get("type") == "string" and not node.keys() & {"enum", "pattern", "format", "$ref"}:
            node["pattern"] = _NOT_BLANK if node.get("minLength", 0) >= 1 else _NO_NUL
        for value in node.values():
            _forbid_nul(value)
    elif isinstance(node, list):
        for value in node:
            _forbid_nul(value)


#: Rules across a request body's fields that a serializer's ``validate`` enforces (component name → the
#: JSON Schema keywords to add), registered with ``request_rule``.
_REQUEST_RULES: dict[str, dict] = {}


def request_rule(**keywords):
    """Class decorator: state in the schema a rule a serializer's ``validate`` enforces across fields.

    E.g. ``@request_rule(anyOf=[{"required": ["ids"]}, {"required": ["all"]}])``. The body is then
    documented as required too: an empty one breaks the rule.
    """

    def decorate(serializer_class):
        _REQUEST_RULES[serializer_class.__name__.removesuffix("Serializer") + "Request"] = keywords
        return serializer_class

    return decorate


def _apply_request_rules(result: dict) -> None:
    components = result.get("components", {}).get("schemas", {})
    ruled = set()
    for name, keywords in _REQUEST_RULES.items():
        if name in components:
            components[name].update(keywords)
            ruled.add(f"#/components/schemas/{name}")
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if body and any(c.get("schema", {}).get("$ref") in ruled for c in body.get("content", {}).values()):
                body["required"] = True


_IDEMPOTENCY_CONFLICT = "`idempotency_key_reused`: the Idempotency-Key was used before with another request."


def _document_idempotency_conflict(responses: dict) -> None:
    """An operation that takes ``Idempotency-Key`` answers 409 ``idempotency_key_reused`` (idempotency/decorators.py)."""
    conflict = responses.get("409")
    if conflict is None:
        responses["409"] = _error_response("409", _IDEMPOTENCY_CONFLICT)
    elif _IDEMPOTENCY_CONFLICT not in conflict.get("description", ""):
        conflict["description"] = f"{conflict.get('description', '').rstrip()} Or {_IDEMPOTENCY_CONFLICT}".strip()


def schema_error_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: document the 4xx answers of every operation.

    Why a hook and not ``extend_schema`` on each view: the exception handler above gives every 4xx
    the same body, whatever the view, so the schema says so in one place and a new endpoint cannot
    forget it. A 4xx a view documented with a description only gets the error body attached; the
    codes any endpoint may answer (credentials, throttling, content negotiation) are added to all;
    400 where there is input to refuse, 404 where the path names an object, 415 where there is a body.
    """
    components = result.setdefault("components", {}).setdefault("schemas", {})
    for name, component in components.items():
        if name.endswith("Request"):  # the request halves (COMPONENT_SPLIT_REQUEST)
            _forbid_nul(component)
    components["Error"] = ERROR_COMPONENT
    _apply_request_rules(result)
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for code, response in responses.items():
                if code.startswith("4") and not response.get("content"):
                    responses[code] = _error_response(code, response.get("description"))
            parameters = operation.get("parameters", [])
            for parameter in parameters:
                if parameter.get("in") == "query":  # query text reaches forms and PostgreSQL too
                    _forbid_nul(parameter.get("schema", {}))
            wanted = ["406", "429"]
            if operation.get("security") != [{}] and {} not in operation.get("security", []):
                wanted += ["401", "403"]
            if any(p.get("in") == "query" for p in parameters) or "requestBody" in operation:
                wanted.append("400")
            if any(p.get("in") == "path" for p in parameters) or any(p.get("name") == "page" for p in parameters):
                wanted.append("404")
            if "requestBody" in operation:
                wanted.append("415")
            if any(p.get("in") == "header" and p.get("name") == "Idempotency-Key" for p in parameters):
                _document_idempotency_conflict(responses)
            for code in wanted:
                responses.setdefault(code, _error_response(code))
    return result


# --- Links from a create to the operations on what it created ------------------------------------------


def _response_properties(result: dict, response: dict) -> dict:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    ref = schema.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        schema = result.get("components", {}).get("schemas", {}).get(ref.rsplit("/", 1)[1], {})
    return schema.get("properties", {})


def schema_create_links(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: OpenAPI links from each create's 201 to the operations on its
    result (``POST /things/`` → ``GET|PUT|PATCH|DELETE /things/{id}/`` and the actions under it).

    A client (and schemathesis's stateful phase) then knows that the ``id`` (or ``slug``) of the answer
    is what those operations take. Only path parameters that the answer has a field for are linked.
    """
    paths = result.get("paths", {})
    for path, operations in paths.items():
        create = operations.get("post")
        if not create or "201" not in create.get("responses", {}):
            continue
        created = create["responses"]["201"]
        fields = _response_properties(result, created)
        links = {}
        for other, other_operations in paths.items():
            match = re.fullmatch(re.escape(path) + r"\{(\w+)\}/([\w-]+/)?", other)
            if not match or match.group(1) not in fields:
                continue
            parameter = match.group(1)
            if re.findall(r"\{(\w+)\}", other[len(path) :]) != [parameter]:
                continue
            for method, operation in other_operations.items():
                if method not in {"get", "put", "patch", "delete", "post"} or "operationId" not in operation:
                    continue
                parameters = {parameter: f"$response.body#/{parameter}"}
                for outer in re.findall(r"\{(\w+)\}", path):  # the create's own path parameters, as sent
                    parameters[outer] = f"$request.path.{outer}"
                links[operation["operationId"]] = {"operationId": operation["operationId"], "parameters": parameters}
        if links:
            created.setdefault("links", {}).update(links)
    return result


# --- JSON types as the schema states them ------------------------------------------------------------------


class StrictJsonTypes:
    # Serializer mixin: a JSON body's values must have the types the schema states.
    #
    # DRF coerces: a CharField takes 123 as "123", a BooleanField takes "yes", 1 and "on", an
    # IntegerField takes "5" and 5.0. The schema says string, boolean and integer, so a client that
    # sends otherwise has a bug it should hear about: a 400 naming the field. Put it before
    # serializers.Serializer in the bases; nested serializers need it too. (A comment, not a docstring:
    # drf-spectacular would publish a docstring as the description of every serializer using it.)

    _TYPE_CHECKS = (
        (serializers.BooleanField, lambda v: isinstance(v, bool), gettext_lazy("Give true or false.")),
        (serializers.ChoiceField, lambda v: isinstance(v, str), gettext_lazy("Give one of the choices, as text.")),
        (serializers.CharField, lambda v: isinstance(v, str), gettext_lazy("Give text.")),
        (
            serializers.IntegerField,
            lambda v: isinstance(v, int) and not isinstance(v, bool),
            gettext_lazy("Give a whole number."),
        ),
        (serializers.ListField, lambda v: isinstance(v, list), gettext_lazy("Give a list.")),
    )

    def to_internal_value(self, data):
        if isinstance(data, dict):
            errors = {}
            for name, field in self.fields.items():
                if field.read_only or field.source == "*" or name not in data or data[name] is None:
                    continue
                for kind, is_ok, message in self._TYPE_CHECKS:
                    if isinstance(field, kind):
                        if not is_ok(data[name]):
                            errors[name] = [str(message)]
                        break
            if errors:
                raise exceptions.ValidationError(errors)
        return super().to_internal_value(data)
