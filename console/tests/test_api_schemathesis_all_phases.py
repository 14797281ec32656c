"""The contract under every phase: schemathesis's CLI, as an API client's author runs it, against a live server.

Phases examples, coverage, fuzzing and stateful, with ``--checks all``, against the console served by a
live server thread (pytest-django's ``live_server``: the test's own database, the whole middleware and
URLconf). Throttling stays on, with limits the run can live with (set below): a 429 is documented on every
operation, with its ``Retry-After``.

Alice's token calls every operation but the staff ones, which are called with a staff token (the
configuration's per-operation header): as alice they would all end in her 403 before any input is read,
leaving their bodies and answers untested (tests/security/test_who_may_do_what.py checks that 403).

The run must end with 0 failures. Waivers are per operation, written below beside the operation with
their reason, and turned into schemathesis's own configuration file for the run.

It runs in ``make test``: about 5 minutes on two shared cores, most of them in the coverage phase;
``CONSOLE_API_ALL_PHASES=0`` skips it. Still to do: rows for the stateful phase to reach (its links are
in the schema; the creates it tries need existing catalogue slugs, so it follows none yet).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.services import api_token_create
from instances.models import GpuModel
from instances.quota import quota_request_create
from instances.tests.conftest import backends, fund

EXAMPLES = 5
# A whole run's budget: well above what it takes on two cores, so only a hang ends it.
TIMEOUT_S = 900

_ROWS = "slugs and ids must name existing rows (the catalogue, your keys, volumes and instances)"
_SECRET = (
    "a name not reserved for the machine's own settings (PATH, LD_*, CONSOLE_*…); a value of at most "
    "VAULT_VALUE_MAX_BYTES bytes as UTF-8 (the schema counts characters), without NUL"
)
_LOGIN = (
    "a registry's host name with an optional port; a user name without a colon; a password of at most 8192 "
    "bytes as UTF-8 (the schema counts characters), without NUL"
)
# Operations whose schema-valid input may still be refused with a 400, because validity depends on rows
# or content the schema cannot state: "schema-valid data is accepted" is waived for them (and only that
# check; every other check still runs on their answers).
VALID_MAY_BE_REFUSED: dict[str, str] = {
    "POST /api/v1/instances/": _ROWS + "; disk_gb's bounds depend on the image and settings",
    "POST /api/v1/deployments/": _ROWS,
    "POST /api/v1/deployments/{id}/redeploy/": _ROWS,
    "POST /api/v1/quota/requests/": _ROWS,
    "POST /api/v1/volumes/": _ROWS + "; size_gb's bounds are settings",
    "POST /api/v1/volumes/{id}/attachments/": _ROWS + "; mount_path must be absolute, outside the system's own",
    "POST /api/v1/account/ssh-keys/": "the key must parse as an OpenSSH public key",
    "POST /api/v1/billing/orders/": "exactly one of amount and amount_fen, in range",
    "POST /api/v1/staff/quota/requests/{id}/approve/": "at most the cards asked for; a reservation in the window",
    "POST /api/v1/staff/reservations/": _ROWS + "; a window ahead, no more cards than the region has in service",
    "POST /api/v1/notifications/webhooks/": "https (http only to localhost outside production), no credentials",
    "PATCH /api/v1/notifications/webhooks/{id}/": "https (http only to localhost outside production)",
    "POST /api/v1/secrets/": _SECRET,
    "PUT /api/v1/secrets/{name}/": _SECRET,
    "PUT /api/v1/instances/{id}/secrets/": _ROWS + " (the names of your secrets)",
    "POST /api/v1/instances/{id}/clone/": _ROWS + " (snapshot: a ready snapshot of this instance)",
    "POST /api/v1/images/import/": "an image reference on a registry the operator allows; a name and tag as a saved image's",
    "POST /api/v1/images/build/": "a recipe FROM an image of the console's registry you may use; a name and tag as a saved image's",
    "POST /api/v1/registry-credentials/": _LOGIN,
    "PUT /api/v1/registry-credentials/{id}/": _LOGIN,
}


# The staff operations' paths: called with the staff token, every other operation with alice's.
STAFF_PATHS = r"^/api/v1/staff/"


def _config(path: Path, *, staff_secret: str) -> None:
    lines = [
        # The coverage phase's every-other-method probes (a 405 per path and method) are the bulk of its
        # cases and test Django's routing, not the contract: test_api_unknown_paths.py checks the 405.
        "[phases.coverage]",
        "unexpected-methods = []",
        "",
        "[phases.stateful]",
        "max-steps = 6",
        "",
        # An operation's header replaces the run's (--header) of the same name.
        "[[operations]]",
        f'include-path-regex = "{STAFF_PATHS}"',
        f'headers = {{ Authorization = "Bearer {staff_secret}" }}',
        "",
    ]
    for label, reason in sorted(VALID_MAY_BE_REFUSED.items()):
        lines += [
            f"# {reason}",
            "[[operations]]",
            f'include-name = "{label}"',
            "checks.positive_data_acceptance.enabled = false",
            "",
        ]
    path.write_text("\n".join(lines))


def _staff_labels() -> set[str]:
    """The schema's staff operations, as "METHOD /path"."""
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    methods = ("get", "put", "post", "patch", "delete")
    return {
        f"{m.upper()} {path}"
        for path, ops in paths.items()
        for m in ops
        if m in methods and re.match(STAFF_PATHS, path)
    }


def _statuses(events: Path) -> dict[str, set[int]]:
    """{"METHOD /path": the statuses it answered} over the whole run, from schemathesis's NDJSON report."""
    found: dict[str, set[int]] = {}
    for line in events.read_text().splitlines():
        scenario = json.loads(line).get("ScenarioFinished")
        if not scenario or "cases" not in scenario["recorder"]:
            continue
        recorder = scenario["recorder"]
        for case_id, case in recorder["cases"].items():
            response = recorder["interactions"].get(case_id, {}).get("response")
            if response:
                label = f"{case['value']['method']} {case['value']['path']}"
                found.setdefault(label, set()).add(response["status_code"])
    return found


@pytest.mark.timeout(TIMEOUT_S + 60)
@pytest.mark.skipif(os.environ.get("CONSOLE_API_ALL_PHASES") == "0", reason="CONSOLE_API_ALL_PHASES=0")
@pytest.mark.skipif(shutil.which("schemathesis", path=str(Path(sys.executable).parent)) is None, reason="no CLI")
def test_every_phase_passes_every_check(transactional_db, live_server, settings, alice, staff, tmp_path):
    from instances.catalogue import catalogue_seed

    settings.PROVISIONING_BACKENDS = backends()
    # Throttling stays on, with room for the run's requests (the rates are the test's, not production's):
    # the run sends about 1,000 requests a minute on two busy cores, more on idle ones, from one account.
    settings.API_RATE_PER_MIN = 100_000
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "anon": "100000/min"},
    }
    catalogue_seed()
    fund(alice, 1_000_000)
    _token, secret = api_token_create(user=alice, name="fuzzer", expires_at=None)
    _token, staff_secret = api_token_create(user=staff, name="fuzzer", expires_at=None)
    # A waiting request of alice's, for the staff's queue.
    quota_request_create(
        user=alice, gpu_model=GpuModel.objects.get(slug="a800-80g"), cards=64, duration_days=30, reason="fuzz"
    )
    config = tmp_path / "schemathesis.toml"
    _config(config, staff_secret=staff_secret)
    cli = Path(sys.executable).parent / "schemathesis"
    log = tmp_path / "schemathesis.log"  # its report, as it goes
    events = tmp_path / "events.ndjson"
    run = subprocess.run(
        [
            str(cli),
            "--no-color",
            f"--config-file={config}",
            "run",
            f"{live_server.url}/api/schema/?format=json",
            f"--url={live_server.url}",
            "--phases=examples,coverage,fuzzing,stateful",
            # No --checks: schemathesis 4 runs every check by default, and an explicit --checks=all would
            # override the per-operation waivers of the configuration file.
            f"--max-examples={EXAMPLES}",
            "--seed=1",
            "--generation-deterministic",
            "--workers=1",
            f"--header=Authorization: Bearer {secret}",
            "--continue-on-failure",
            # Every case as it happens, for a run that is stopped before its summary.
            "--report=ndjson",
            f"--report-ndjson-path={events}",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=TIMEOUT_S,
    )
    assert run.returncode == 0, log.read_text()[-30000:]
    # The staff operations were called as staff: each answered something other than a refusal of the caller.
    wanted = _staff_labels()
    staff_statuses = {label: codes for label, codes in _statuses(events).items() if label in wanted}
    assert set(staff_statuses) == wanted
    refused_only = {label: codes for label, codes in staff_statuses.items() if codes <= {401, 403}}
    assert not refused_only
