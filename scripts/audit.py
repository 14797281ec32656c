"""`make audit`: the locked packages against the known vulnerabilities (pip-audit, PyPI's advisories).

Usage: python scripts/audit.py requirements.txt [requirements-run.txt ...]

The locks pin every package with its hashes, so pip-audit reads them as they are (``--require-hashes
--disable-pip``): no virtualenv, no resolver, the versions production installs. Exit status:

- 0: every locked package was checked and none has a known vulnerability;
- 0 too, saying so loudly on stderr, when the vulnerability service could not be reached or could
  not answer for some packages (pip-audit then "skips" them, and its own summary would read as clean:
  an audit that did not run must not pass as one that found nothing, nor block a developer offline);
- 1: a vulnerability is known in a locked package, or pip-audit failed for another reason;
- 1 as well for an unreachable service or skipped packages when ``AUDIT_STRICT=1`` (CI, a release).

``AUDIT_SERVICE`` picks pip-audit's service (``pypi``, the default, or ``osv``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# What pip-audit prints when its service did not answer (its ServiceError, requests' connection
# errors): the audit did not run, which is not the same as finding nothing.
UNREACHABLE_MARKERS = (
    "ServiceError",
    "ConnectionError",
    "ConnectTimeout",
    "ReadTimeout",
    "Max retries exceeded",
    "Failed to establish a new connection",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
)


def strict() -> bool:
    return os.environ.get("AUDIT_STRICT", "").strip().lower() in {"1", "true", "yes", "on"}


def service_unreachable(output: str) -> bool:
    return any(marker in output for marker in UNREACHABLE_MARKERS)


def audit_command(locks: list[str]) -> list[str]:
    """pip-audit's command line for these locks, read as they are (pinned and hashed: no resolver)."""
    command = [
        sys.executable,
        "-m",
        "pip_audit",
        "--require-hashes",
        "--disable-pip",
        "--progress-spinner",
        "off",
        "--format",
        "json",
        "--vulnerability-service",
        os.environ.get("AUDIT_SERVICE", "pypi"),
        "--timeout",
        os.environ.get("AUDIT_TIMEOUT", "30"),
    ]
    for lock in locks:
        command += ["-r", lock]
    return command


def report(locks: list[str], found: dict) -> int:
    """Print pip-audit's JSON finding as lines a person reads, and judge it (see the module's doc)."""
    dependencies = found.get("dependencies", [])
    vulnerable = [dep for dep in dependencies if dep.get("vulns")]
    skipped = [dep for dep in dependencies if dep.get("skip_reason")]
    for dep in vulnerable:
        for vuln in dep["vulns"]:
            fixes = ", ".join(vuln.get("fix_versions") or []) or "no fixed release yet"
            print(f"{dep['name']} {dep['version']}: {vuln['id']} (fixed in {fixes})")
    if vulnerable:
        print(f"audit: {len(vulnerable)} locked package(s) with known vulnerabilities", file=sys.stderr)
        return 1
    if skipped:
        reasons = sorted({dep["skip_reason"].split(":")[0] for dep in skipped})
        checked = len(dependencies) - len(skipped)
        what = "NOTHING WAS AUDITED" if not checked else f"only {checked} of {len(dependencies)} packages were audited"
        print(
            f"audit: the vulnerability service could not answer for {len(skipped)} package(s), so {what} "
            f"({'; '.join(reasons)}; e.g. {skipped[0]['name']}). "
            + ("Failing: AUDIT_STRICT=1." if strict() else "Passing anyway; AUDIT_STRICT=1 makes this a failure."),
            file=sys.stderr,
        )
        return 1 if strict() else 0
    print(f"audit: no known vulnerability in the {len(dependencies)} packages of {', '.join(locks)}", file=sys.stderr)
    return 0


def run_one(lock: str) -> tuple[dict | None, int]:
    """pip-audit on one lock (each is a whole install of its own: the local lock may pin other versions)."""
    result = subprocess.run(audit_command([lock]), capture_output=True, text=True, check=False)  # noqa: S603
    try:
        found = json.loads(result.stdout)
    except ValueError:
        found = None
    if found is not None and result.returncode in (0, 1):
        return found, 0
    if service_unreachable(result.stdout + result.stderr):
        last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        print(
            f"audit: the vulnerability service could not be reached, so NOTHING WAS AUDITED ({last}). "
            + ("Failing: AUDIT_STRICT=1." if strict() else "Passing anyway; AUDIT_STRICT=1 makes this a failure."),
            file=sys.stderr,
        )
        return None, 1 if strict() else 0
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return None, result.returncode or 1


def main(argv: list[str]) -> int:
    locks = argv or ["requirements.txt"]
    missing = [lock for lock in locks if not Path(lock).is_file()]
    if missing:
        print(f"audit: no such lock file: {', '.join(missing)}", file=sys.stderr)
        return 2
    merged: dict[tuple[str, str | None], dict] = {}
    for lock in locks:
        found, status = run_one(lock)
        if found is None:
            return status
        for dep in found.get("dependencies", []):
            merged.setdefault((dep["name"], dep.get("version") or dep.get("skip_reason")), dep)
    return report(locks, {"dependencies": list(merged.values())})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
