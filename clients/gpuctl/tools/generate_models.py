"""Write ``src/gpuctl/models.py``: one ``TypedDict`` per object and one ``Literal`` per enum of the
console's OpenAPI schema, so the SDK's answers are typed and a type checker catches a field the console
does not send.

Regenerate after the schema changed (``tests/test_client_matches_schema.py`` fails until then), from the
console's repository root::

    .venv/bin/python clients/gpuctl/tools/generate_models.py          # runs manage.py spectacular
    .venv/bin/python clients/gpuctl/tools/generate_models.py schema.json  # or from a saved schema

It needs nothing but the standard library: ``render(schema)`` is also what the test compares with.
"""

from __future__ import annotations

import json
import keyword
import subprocess
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "src" / "gpuctl" / "models.py"
HEADER = '''"""Typed models of the console's API: generated from its OpenAPI schema by ``tools/generate_models.py``.

Do not edit by hand: regenerate. Fields the schema does not require are ``NotRequired``; ``X | None``
where the schema says ``nullable``. Answers are plain dicts at run time (``TypedDict``), so a field the
console adds later reaches the caller untouched.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

'''
SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def _ref(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(prop: dict) -> str:
    """The Python annotation of one property's schema."""
    if "$ref" in prop:
        text = _ref(prop["$ref"])
    elif "allOf" in prop and len(prop["allOf"]) == 1:
        text = _type(prop["allOf"][0])
    elif "oneOf" in prop or "anyOf" in prop:
        parts = [_type(p) for p in prop.get("oneOf") or prop.get("anyOf")]
        text = " | ".join(dict.fromkeys(p for p in parts if p != "None")) or "Any"
        if "None" in parts:
            text += " | None"
    elif "enum" in prop:
        values = [v for v in prop["enum"] if v is not None]
        text = f"Literal[{', '.join(repr(v) for v in values)}]" if values else "None"
    elif prop.get("type") == "array":
        text = f"list[{_type(prop.get('items') or {})}]"
    elif prop.get("type") == "object" or "properties" in prop:
        extra = prop.get("additionalProperties")
        text = f"dict[str, {_type(extra)}]" if isinstance(extra, dict) and extra else "dict[str, Any]"
    else:
        text = SCALARS.get(prop.get("type", ""), "Any")
    if prop.get("nullable") and not text.endswith("| None") and text not in ("Any", "None"):
        text += " | None"
    return text


def render(schema: dict) -> str:
    """The text of ``models.py`` for ``schema`` (a dict of the OpenAPI document)."""
    components = schema.get("components", {}).get("schemas", {})
    enums, objects = [], []
    for name in sorted(components):
        body = components[name]
        if "enum" in body:
            enums.append(f"{name} = {_type({k: v for k, v in body.items() if k != 'nullable'})}\n")
            continue
        if body.get("type") != "object" and "properties" not in body:
            enums.append(f"{name} = {_type(body)}\n")
            continue
        required = set(body.get("required", []))
        lines = [f"class {name}(TypedDict):"]
        description = (body.get("description") or "").strip().splitlines()
        if description:
            lines.append(f'    """{description[0].replace(chr(34) * 3, "")}"""')
        properties = body.get("properties", {})
        plain = {p: properties[p] for p in properties if p.isidentifier() and not keyword.iskeyword(p)}
        if len(plain) != len(properties):  # a key Python cannot name: the functional form
            fields = ", ".join(f"{p!r}: {_annotation(properties[p], p in required)}" for p in properties)
            objects.append(f"{name} = TypedDict({name!r}, {{{fields}}})\n")
            continue
        for prop, spec in plain.items():
            lines.append(f"    {prop}: {_annotation(spec, prop in required)}")
        if len(lines) == 1 or (len(lines) == 2 and description):
            lines.append("    pass")
        objects.append("\n".join(lines) + "\n")
    names = sorted(components)
    exports = "__all__ = [\n" + "".join(f"    {n!r},\n" for n in names) + "]\n"
    return HEADER + "\n".join(enums) + "\n\n" + "\n\n".join(objects) + "\n\n" + exports


def _annotation(spec: dict, required: bool) -> str:
    text = _type(spec)
    return text if required else f"NotRequired[{text}]"


def _schema_from_console() -> dict:
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--format", "openapi-json"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout
    return json.loads(out)


def main() -> None:
    schema = json.loads(Path(sys.argv[1]).read_text()) if len(sys.argv) > 1 else _schema_from_console()
    TARGET.write_text(render(schema))
    # The test compares syntax trees, so formatting is free: the project's own formatter, where it is.
    subprocess.run([sys.executable, "-m", "ruff", "format", str(TARGET)], check=False, capture_output=True)  # noqa: S603
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
