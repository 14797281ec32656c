"""The client calls only operations the console's schema has: renaming or removing an endpoint the
client uses fails here, before a user meets it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gpuctl.client import INSTANCE_VERBS

CLIENT = Path(__file__).resolve().parents[1] / "src" / "gpuctl" / "client.py"
CALL = re.compile(r'_call\("(GET|POST|PUT|PATCH|DELETE)", f?"([^"]+)"|_(create|all)\(\s*"([^"]+)"')


def _calls() -> set[tuple[str, str]]:
    calls = set()
    for method, path, helper, helper_path in CALL.findall(CLIENT.read_text()):
        if helper:
            method, path = ("POST" if helper == "create" else "GET"), helper_path
        for verb in INSTANCE_VERBS if "{verb}" in path else ("",):
            calls.add((method, re.sub(r"\{[^}]+\}", "{}", path.replace("{verb}", verb))))
    return calls


@pytest.mark.django_db
def test_every_call_of_the_client_is_an_operation_of_the_schema(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operations = {
        (method.upper(), re.sub(r"\{[^}]+\}", "{}", path.removeprefix("/api/v1")))
        for path, ops in schema["paths"].items()
        for method in ops
    }
    calls = _calls()
    assert len(calls) >= 14  # the regular expression still reads the client
    assert calls <= operations, calls - operations
