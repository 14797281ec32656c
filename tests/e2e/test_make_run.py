"""`make run` in a fresh clone, as the README says: a newcomer's first session in Chromium, then ten API
clients for a few minutes on the same console. The figures go to the test log (pytest -s shows them).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.e2e.flow import newcomer_first_session, open_link_from_the_mailbox
from tests.e2e.soak import SEED_USERS, STABLE, soak

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]
SOAK_S = float(os.environ.get("E2E_SOAK_S", "180"))


def test_a_newcomer_signs_up_launches_stops_starts_releases_and_reads_the_bill(made_run, chromium, shots):
    page = chromium.new_page(viewport={"width": 1366, "height": 900})
    try:
        times = newcomer_first_session(page, made_run.url, "newcomer@example.com", open_link_from_the_mailbox, shots)
    finally:
        page.screenshot(path=str(shots / "last.png"), full_page=True)
        page.close()
    print("\nnewcomer steps (s):", json.dumps(times))


def test_ten_api_clients_for_minutes_leave_nothing_stuck_and_no_process_restarts(made_run):
    out = made_run.manage("shell", stdin=SEED_USERS.format(n=10, tag="make-run"))
    tokens = [line.split()[1] for line in out.splitlines() if line.startswith("TOKEN ")]
    assert len(tokens) == 10
    result = soak(made_run.url, tokens, SOAK_S)

    assert not result.server_errors, result.server_errors[:5]
    assert sum(result.operations.values()) >= 40, (result.operations, result.refused)
    statuses = json.loads(
        made_run.manage(
            "shell",
            "-c",
            "import json; from instances.models import Instance; "
            f"print(json.dumps({{str(pk): status for pk, status in "
            f"Instance.objects.filter(pk__in={result.instances!r}).values_list('pk', 'status')}}))",
        )
        .strip()
        .splitlines()[-1]
    )
    stuck = {pk: status for pk, status in statuses.items() if status not in STABLE}
    failed = {pk: status for pk, status in statuses.items() if status in ("failed", "lost")}
    restarts = re.findall(r"^console +\| (\w+) exited with code", made_run.log_text(), re.M)
    print(
        "\nsoak:",
        json.dumps(
            {
                "seconds": SOAK_S,
                "operations": sum(result.operations.values()),
                "by_kind": result.operations,
                "refused": result.refused,
                "instances": len(result.instances),
                "stuck": len(stuck),
                "failed": len(failed),
                "restarts": len(restarts),
            }
        ),
    )
    assert not stuck, stuck
    assert not failed, failed
    assert restarts == [], f"processes restarted during the soak: {restarts}"


def test_a_worker_killed_under_make_run_is_started_again_and_the_console_keeps_serving(made_run):
    import signal
    import time

    import httpx
    import psutil

    worker = next(
        p
        for p in psutil.process_iter(["cmdline", "cwd"])
        if p.info["cwd"] == str(made_run.clone)
        and "worker" in (p.info["cmdline"] or [])
        and "-Q" not in (p.info["cmdline"] or [])  # the main worker, not the one of webhooks and mail
        and any(part.endswith("/celery") for part in p.info["cmdline"] or [])
        and p.parent() is not None
        and "console.run" in " ".join(p.parent().cmdline())
    )
    worker.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "starting worker again" not in made_run.log_text():
        assert httpx.get(made_run.url + "healthz", timeout=5).status_code == 200
        time.sleep(0.5)
    log = made_run.log_text()
    assert "worker exited with code -9; restarting it" in log
    assert "starting worker again (restart 1)" in log

    # The new worker does the work: an API launch reaches running.
    out = made_run.manage("shell", stdin=SEED_USERS.format(n=1, tag="after-kill"))
    token = next(line.split()[1] for line in out.splitlines() if line.startswith("TOKEN "))
    result = soak(made_run.url, [token], 1)
    assert result.operations["launch"] >= 1 and not result.server_errors, result


def test_make_run_starts_the_ssh_gateway_on_its_port(made_run):
    """The gateway is one of `make run`'s processes, on GATEWAY_PORT: it answers as an SSH server."""
    import socket

    from tests.e2e.conftest import wait_for_log

    wait_for_log(made_run.log, f"SSH gateway listening on 127.0.0.1:{made_run.gateway_port}", timeout=60)
    with socket.create_connection(("127.0.0.1", made_run.gateway_port), timeout=10) as sock:
        assert sock.makefile("rb").readline().startswith(b"SSH-2.0-gpu-console-gateway")
