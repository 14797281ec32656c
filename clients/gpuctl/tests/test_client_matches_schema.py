"""The SDK and the console's schema agree: every operation of the schema has exactly one method of
``gpuctl.Client``, with the same method, path, path parameters (in order), query parameters, body,
``Idempotency-Key``, pagination and answer type; and ``gpuctl.models`` is what the generator writes for
this schema. A change to the API fails here, before a user of the SDK meets it. The fix is to
regenerate the models (``tools/generate_models.py``) and add or change the method."""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

import pytest
from gpuctl.api import Client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from generate_models import render  # noqa: E402

# Where the schema is wrong, the SDK follows the server; each waiver says why (and is in the README).
# None today: the schema states what the server enforces (console/tests/test_api_schemathesis_all_phases.py).
QUERY_WAIVERS: dict[str, set[str]] = {}

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from django.test import Client as DjangoClient

    with django_db_blocker.unblock():
        return DjangoClient().get("/api/schema/", {"format": "json"}).json()


def _methods() -> dict[str, tuple[str, object]]:
    found: dict[str, tuple[str, object]] = {}
    for name, function in inspect.getmembers(Client, inspect.isfunction):
        spec = getattr(function, "operation", None)
        if spec is not None:
            assert spec.operation_id not in found, f"two methods for {spec.operation_id}"
            found[spec.operation_id] = (name, function)
    return found


def _ref(schema_object: dict) -> str | None:
    return schema_object["$ref"].rsplit("/", 1)[-1] if "$ref" in schema_object else None


def test_every_operation_of_the_schema_is_a_method_of_the_sdk(schema):
    methods = _methods()
    operations = {
        op["operationId"]: (verb, path, op)
        for path, ops in schema["paths"].items()
        for verb, op in ops.items()
        if verb in METHODS
    }
    assert len(operations) > 100  # the schema was read
    assert set(operations) - set(methods) == set(), "operations without a method"
    assert set(methods) - set(operations) == set(), "methods of operations the schema no longer has"

    problems = []
    for operation_id, (verb, path, op) in sorted(operations.items()):
        name, function = methods[operation_id]
        spec = function.operation
        signature = inspect.signature(function)
        params = list(signature.parameters.values())[1:]
        where = f"{operation_id} ({name})"
        if (spec.method, API + spec.path) != (verb.upper(), path):
            problems.append(f"{where}: calls {spec.method} {spec.path}, the schema says {verb.upper()} {path}")

        in_path = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
        positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD and p.name not in ("body", "content")]
        if positional != re.findall(r"{(\w+)}", path) or set(positional) != set(in_path):
            problems.append(f"{where}: path parameters {positional}, the schema has {in_path}")

        query = {p["name"]: p for p in op.get("parameters", []) if p["in"] == "query"}
        paginated = "page" in query
        if paginated != spec.paginated:
            problems.append(f"{where}: paginated is {spec.paginated}, the schema says {paginated}")
        expected = set(query) - {"page", "page_size"} - QUERY_WAIVERS.get(operation_id, set())
        keywords = {p.name for p in params if p.kind is p.KEYWORD_ONLY} - {"idempotency_key"}
        if keywords != expected:
            problems.append(f"{where}: query parameters {sorted(keywords)}, the schema has {sorted(expected)}")
        for key in keywords & expected:
            required = query[key].get("required", False)
            if required != (signature.parameters[key].default is inspect.Parameter.empty):
                problems.append(f"{where}: {key} required is {not required}, the schema says {required}")

        headers = {p["name"] for p in op.get("parameters", []) if p["in"] == "header"}
        if "Idempotency-Key" in headers and "idempotency_key" not in signature.parameters:
            problems.append(f"{where}: takes no idempotency_key, the schema has the Idempotency-Key header")

        content = (op.get("requestBody") or {}).get("content", {})
        body_param = "body" if "application/json" in content else "content" if content else None
        has = [p for p in ("body", "content") if p in signature.parameters]
        if has != ([body_param] if body_param else []):
            problems.append(f"{where}: body parameters {has}, the schema's body is {list(content)}")
        elif body_param == "body":
            wanted = _ref(content["application/json"]["schema"])
            annotation = str(signature.parameters["body"].annotation)
            if wanted and f"m.{wanted}" not in annotation:
                problems.append(f"{where}: body is {annotation}, the schema says {wanted}")
            required = bool(op["requestBody"].get("required"))
            if required != (signature.parameters["body"].default is inspect.Parameter.empty):
                problems.append(f"{where}: body required is {not required}, the schema says {required}")

        problems += _answer_problems(where, op, signature, spec, operation_id)
    assert problems == []


def _answer_problems(where, op, signature, spec, operation_id) -> list[str]:
    returns = str(signature.return_annotation)
    for status in ("200", "201", "202", "204"):
        answer = op["responses"].get(status)
        if answer is None:
            continue
        content = answer.get("content", {})
        if "application/json" not in content:
            expected = "Iterator[bytes]" if content else "None"
            return [] if returns == expected else [f"{where}: returns {returns}, the schema's answer is {expected}"]
        body = content["application/json"]["schema"]
        ref = _ref(body) or (_ref(body.get("items", {})) if body.get("type") == "array" else None)
        if spec.paginated:
            item = ref.removeprefix("Paginated").removesuffix("List")
            expected = f"Iterator[m.{item}]"
        elif body.get("type") == "array":
            expected = f"list[m.{ref}]" if ref else "list[Any]"
        else:
            expected = f"m.{ref}" if ref else "dict[str, Any]"
        return [] if returns == expected else [f"{where}: returns {returns}, the schema says {expected}"]
    return [f"{where}: the schema documents no success answer"]


API = "/api/v1"


def test_the_models_are_those_the_generator_writes_for_this_schema(schema):
    committed = (ROOT / "src" / "gpuctl" / "models.py").read_text()
    assert ast.dump(ast.parse(committed)) == ast.dump(ast.parse(render(schema))), (
        "gpuctl.models is stale: run `.venv/bin/python clients/gpuctl/tools/generate_models.py`"
    )
