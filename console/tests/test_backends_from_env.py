"""CONSOLE_PROVISIONING_BACKENDS adds, replaces or removes backends without editing settings.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def backends_with(value: str) -> subprocess.CompletedProcess:
    code = (
        "import json, django; django.setup(); from django.conf import settings; "
        "print(json.dumps({a: c['BACKEND'] for a, c in settings.PROVISIONING_BACKENDS.items()}))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings", "CONSOLE_PROVISIONING_BACKENDS": value}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


def test_aliases_are_added_and_null_removes_one():
    extra = {
        "default": None,
        "hpc": {"BACKEND": "providers.simulated.backend.SimulatedBackend", "OPTIONS": {"REGION": "hpc-1"}},
    }
    result = backends_with(json.dumps(extra))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"hpc": "providers.simulated.backend.SimulatedBackend"}


def test_bad_values_stop_the_console_with_a_clear_message():
    for value, message in (
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"x": {"OPTIONS": {}}}', "needs a BACKEND"),
    ):
        result = backends_with(value)
        assert result.returncode != 0
        assert message in result.stderr
