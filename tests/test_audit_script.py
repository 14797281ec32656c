"""scripts/audit.py (`make audit`) judges pip-audit's finding: a vulnerability fails, an audit the
service could not answer is said aloud and fails only under AUDIT_STRICT=1, and never reads as clean."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("audit_script", ROOT / "scripts" / "audit.py")
audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(audit)

CLEAN = {"dependencies": [{"name": "django", "version": "6.1.3", "vulns": []}], "fixes": []}
VULNERABLE = {
    "dependencies": [
        {"name": "django", "version": "6.1.3", "vulns": []},
        {"name": "urllib3", "version": "2.0.0", "vulns": [{"id": "GHSA-xxxx", "fix_versions": ["2.0.7"]}]},
    ],
    "fixes": [],
}
UNANSWERED = {
    "dependencies": [
        {"name": "django", "skip_reason": "Dependency not found on PyPI and could not be audited: django (6.1.3)"},
        {"name": "redis", "skip_reason": "Dependency not found on PyPI and could not be audited: redis (8.1.0)"},
    ],
    "fixes": [],
}


@pytest.fixture(autouse=True)
def _not_strict(monkeypatch):
    monkeypatch.delenv("AUDIT_STRICT", raising=False)


def test_clean_passes(capsys):
    assert audit.report(["requirements.txt"], CLEAN) == 0
    assert "no known vulnerability" in capsys.readouterr().err


def test_a_vulnerability_fails_and_names_its_fix(capsys, monkeypatch):
    assert audit.report(["requirements.txt"], VULNERABLE) == 1
    assert "urllib3 2.0.0: GHSA-xxxx (fixed in 2.0.7)" in capsys.readouterr().out
    monkeypatch.setenv("AUDIT_STRICT", "1")
    assert audit.report(["requirements.txt"], VULNERABLE) == 1


def test_an_unanswered_audit_says_so_and_fails_only_when_strict(capsys, monkeypatch):
    assert audit.report(["requirements.txt"], UNANSWERED) == 0
    err = capsys.readouterr().err
    assert "NOTHING WAS AUDITED" in err and "AUDIT_STRICT=1" in err and "no known vulnerability" not in err
    monkeypatch.setenv("AUDIT_STRICT", "1")
    assert audit.report(["requirements.txt"], UNANSWERED) == 1
    assert "Failing" in capsys.readouterr().err


def test_a_partly_answered_audit_is_not_clean(capsys):
    partial = {"dependencies": CLEAN["dependencies"] + UNANSWERED["dependencies"][1:], "fixes": []}
    assert audit.report(["requirements.txt"], partial) == 0
    assert "only 1 of 2 packages were audited" in capsys.readouterr().err


def test_connection_failures_read_as_unreachable():
    assert audit.service_unreachable("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.osv.dev')")
    assert not audit.service_unreachable("ValueError: bad requirement line")


def test_the_audit_reads_the_locks_as_they_are():
    command = audit.audit_command(["requirements.txt", "requirements-dev.txt"])
    assert "--require-hashes" in command and "--disable-pip" in command
    assert command[-4:] == ["-r", "requirements.txt", "-r", "requirements-dev.txt"]
