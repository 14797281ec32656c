"""The chaos soak: ten API clients launch, stop, start and release on a console started as `make run`
starts it, while the soak kills, in turn, web, the worker, beat, the gateway, Redis and PostgreSQL, and
makes the provider unreachable for a minute. After each fault the console answers within 30 s; at the
end no instance is in a busy state, nothing failed, no call got a 500, `ledger_check` passes, every
running second is billed exactly once (`usage_check`: the meters against the timelines and the ledger),
and no process's resident memory grew more than 20 % after its warm-up. Midway, `manage.py backup`
dumps the console under load (retried, as an operator's cron would, when a fault takes PostgreSQL
down meanwhile); the dump restores into a fresh database where the ledger and the meters agree too.
(That the reconciler adopts a restored database's machines is ``console/tests/test_backup_restore``'s
drill, on machines that live outside the database.) It prints one JSON line.

`make soak` runs it for 30 minutes (CHAOS_SOAK_S=1800); `make test` runs this short form, every fault
included. Its console is its own (CONSOLE_VAR_DIR), beside the other e2e tests' consoles.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.e2e.chaos import FAULTS, PROVIDER_OUTAGE_S, RECOVERY_S, Chaos, ConsoleProcesses
from tests.e2e.conftest import clean_env, make_run
from tests.e2e.soak import SEED_USERS, STABLE, TRANSITIONAL, soak

SOAK_S = float(os.environ.get("CHAOS_SOAK_S", "240"))
CLIENTS = int(os.environ.get("CHAOS_SOAK_CLIENTS", "10"))
WARM_UP_S = 30.0
SETTLE_S = 240  # after the clients stop, for the last operations to finish
MEMORY_GROWTH_MAX = 1.2

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(int(SOAK_S) + 1800)]

STATUSES = """
import json
from instances.models import Instance
rows = Instance.objects.filter(owner__email__startswith="soak-").values_list("pk", "status")
print(json.dumps({str(pk): status for pk, status in rows}))
"""
# The ledger's own check and the usage audit (manage.py ledger_check and usage_check), as one JSON line
# whatever they find, so the soak's line has the figures even when an assertion fails.
CHECKS = """
import json
from billing.services import ledger_check
from instances.models import Instance
from instances.usage_audit import usage_audit
ledger = ledger_check()
usage = usage_audit(instances=Instance.objects.filter(owner__email__startswith="soak-"))
print(json.dumps({"ledger_ok": ledger.ok, "ledger_problems": ledger.problems[:5], **usage.as_dict(),
                  "usage_problems": usage.problems[:10]}, default=str))
"""


@pytest.fixture(scope="module")
def chaos_console(clone, tmp_path_factory):
    var = clone / "var-chaos"
    with make_run(
        clone, tmp_path_factory.mktemp("e2e-logs") / "make-run-chaos.log", CONSOLE_VAR_DIR=str(var)
    ) as console:
        yield console, var


def _statuses(console) -> dict[str, str]:
    return json.loads(console.manage("shell", stdin=STATUSES).strip().splitlines()[-1])


class MidSoakBackup:
    """``manage.py backup`` at ``at_s`` into the soak, retried every 10 s while a fault keeps it from
    the database; ``folder`` is the backup written, ``errors`` what the failed tries said."""

    def __init__(self, console, *, into: Path, at_s: float) -> None:
        self.console, self.into, self.at_s = console, into, at_s
        self.folder: Path | None = None
        self.errors: list[str] = []
        self.taken_at_s: float | None = None

    def run(self, started: float) -> None:
        time.sleep(max(0.0, started + self.at_s - time.monotonic()))
        for _attempt in range(12):
            try:
                self.console.manage("backup", "--into", str(self.into))
            except AssertionError as exc:  # manage() asserts the command's success
                self.errors.append(str(exc)[-300:])
                time.sleep(10)
                continue
            self.folder = max(self.into.glob("backup-*"))
            self.taken_at_s = round(time.monotonic() - started, 1)
            return


def _restored_checks(console, var: Path, folder: Path) -> dict:
    """Restore ``folder`` into a fresh database on the console's PostgreSQL and run the soak's checks
    there; the database is dropped afterwards."""
    services = dict(
        line.split("=", 1) for line in (var / "run" / "services.env").read_text().splitlines() if "=" in line
    )
    live = services["DATABASE_URL"]
    server, _, _name = live.rpartition("/")
    name = f"soak_restore_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(f"{server}/postgres".replace("postgres://", "postgresql://", 1), autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        env = clean_env(**console.settings_env, DATABASE_URL=f"{server}/{name}")
        restored = console.manage("restore", str(folder), env=env)
        checks = json.loads(console.manage("shell", stdin=CHECKS, env=env).strip().splitlines()[-1])
        return {"restore_said_ledger_ok": "ledger OK" in restored, **checks}
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_the_console_rides_out_each_fault_and_bills_every_second_once(chaos_console):
    console, var = chaos_console
    out = console.manage("shell", stdin=SEED_USERS.format(n=CLIENTS, tag="chaos"))
    tokens = [line.split()[1] for line in out.splitlines() if line.startswith("TOKEN ")]
    assert len(tokens) == CLIENTS
    # The faults spread over the soak: the provider's outage (a minute) and the others evenly apart.
    every_s = max(15.0, (SOAK_S - WARM_UP_S - PROVIDER_OUTAGE_S) / (len(FAULTS) - 1))
    chaos = Chaos(
        url=console.url,
        token=tokens[0],
        processes=ConsoleProcesses(console.process.pid),
        unreachable_switch=var / "faults" / "simulated-unreachable",
        every_s=every_s,
        warm_up_s=WARM_UP_S,
    )
    injector = threading.Thread(target=chaos.run, daemon=True)
    started = time.monotonic()
    backup = MidSoakBackup(console, into=var / "backups", at_s=SOAK_S / 2)
    backing_up = threading.Thread(target=backup.run, args=(started,), daemon=True)
    injector.start()
    backing_up.start()
    result = soak(console.url, tokens, SOAK_S, settle_timeout=SETTLE_S, tolerate_faults=True)
    # Every fault happens, however quickly the clients finished.
    while injector.is_alive() and len(chaos.records) < len(FAULTS) and time.monotonic() - started < SOAK_S + 600:
        time.sleep(1)
    chaos.stop.set()
    injector.join(timeout=PROVIDER_OUTAGE_S + RECOVERY_S + 30)

    deadline = time.monotonic() + SETTLE_S
    statuses = _statuses(console)
    while any(s in TRANSITIONAL for s in statuses.values()) and time.monotonic() < deadline:
        time.sleep(5)
        statuses = _statuses(console)
    busy = {pk: s for pk, s in statuses.items() if s not in STABLE}
    failed = {pk: s for pk, s in statuses.items() if s in ("failed", "lost")}
    checks = json.loads(console.manage("shell", stdin=CHECKS).strip().splitlines()[-1])
    growth = chaos.memory_growth()
    backing_up.join(timeout=180)
    restored = _restored_checks(console, var, backup.folder) if backup.folder else {}
    print(
        "\nchaos soak:",
        json.dumps(
            {
                "soak_s": SOAK_S,
                "clients": CLIENTS,
                "operations": sum(result.operations.values()),
                "by_kind": result.operations,
                "refused": result.refused,
                "unreachable_calls": result.unreachable,
                "unavailable_503": result.unavailable,
                "server_errors": len(result.server_errors),
                "recovered_s": {r.fault: r.recovered_s for r in chaos.records},
                "instances": len(statuses),
                "busy": len(busy),
                "failed": len(failed),
                "ledger_ok": checks["ledger_ok"],
                "running_s": checks["running_s"],
                "billed_s": checks["billed_s"],
                "usage_problems": checks["problems"],
                "rss_growth": growth,
                "backup_at_s": backup.taken_at_s,
                "backup_retries": len(backup.errors),
                "restored": {k: restored.get(k) for k in ("ledger_ok", "running_s", "billed_s", "problems")},
            }
        ),
    )
    assert chaos.errors == []
    assert [r.fault for r in chaos.records] == list(FAULTS)
    slow = [r for r in chaos.records if r.recovered_s is None or r.recovered_s > RECOVERY_S]
    assert not slow, slow
    assert not result.server_errors, result.server_errors[:5]
    assert sum(result.operations.values()) >= CLIENTS, (result.operations, result.refused)
    assert not busy, busy
    assert not failed, failed
    assert checks["ledger_ok"], checks["ledger_problems"]
    assert checks["problems"] == 0 and checks["running_s"] == checks["billed_s"], checks["usage_problems"]
    grew = {role: ratio for role, ratio in growth.items() if ratio > MEMORY_GROWTH_MAX}
    assert not grew, growth
    assert backup.folder is not None, backup.errors
    assert restored["restore_said_ledger_ok"] and restored["ledger_ok"], restored["ledger_problems"]
    assert restored["problems"] == 0 and restored["running_s"] == restored["billed_s"], restored["usage_problems"]
