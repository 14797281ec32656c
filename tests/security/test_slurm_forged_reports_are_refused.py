"""A Slurm job's report decides where the console's proxy and SSH gateway connect, with the owner's
tokens, from inside the console's network; the job runs the tenant's code as the tenant's user, so
its report is the tenant's to forge (issue #25). The console holds the only key: it believes a report
only when the tenant's user wrote it, its node and host are in the job's allocation as Slurm has it,
and its ports are the instance's declared services within the job's range. Anything else is refused,
and logged as a security event; the console's own verified copy does not verify under another key.
"""

from __future__ import annotations

import logging

import pytest

from providers import InstanceSpec, Observed
from providers.base import Tenant
from providers.slurm.backend import SlurmBackend
from providers.slurm.job import claim_read, claim_write, report_path, report_write
from providers.slurm.tests.slurm_fake import FakeSlurm, FakeTenantAccounts

KEY = "6f1c2a9b-03de-4f00-9000-000000000025"
TENANT = Tenant("gpuc-t9001", 79001, 1 << 30, 65536)
LOGGER = "console.security.slurm"


@pytest.fixture
def running(tmp_path):
    """A running instance on a fake Slurm (its node gpu01, address 127.0.0.1), whose job declared
    JupyterLab and reported it on port 20001."""
    backend = SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "SERVICES": ["lab"], "GPU_TYPES": {}})
    backend.api = fake = FakeSlurm(prefix=backend.prefix, nodes=("gpu01", "gpu02"))
    backend.tenants = FakeTenantAccounts()
    spec = InstanceSpec(node="gpu01", gpu_model="h200", gpu_count=1, image="x", disk_gb=10, tenant=TENANT)
    state = backend.create(key=KEY, spec=spec)
    fake.advance()
    claim = report_path(backend._dir(KEY) / "run", 0)
    claim_write(claim, {**claim_read(claim), "ports": {"lab": 20001}})
    observation = backend.poll(key=KEY, state=state)
    assert observation.state == Observed.RUNNING  # the genuine report passes
    assert backend.proxy_target(key=KEY, service="lab").port == 20001
    return backend, observation.backend_state, claim


def _forge(claim, **changes) -> None:
    claim_write(claim, {**claim_read(claim), **changes})


@pytest.mark.parametrize(
    ("changes", "logged"),
    [
        ({"host": "169.254.169.254"}, "host '169.254.169.254' is not an address of the job's nodes"),
        ({"node": "gpu02"}, "node 'gpu02' is not in the job's allocation (gpu01)"),
        ({"ports": {"lab": 20001, "metadata": 20002}}, "service 'metadata' was not declared"),
        ({"ports": {"lab": 5432}}, "port 5432 of lab is outside the job's range 20000-29999"),
        ({"ports": {"lab": "20001"}}, "port '20001' of lab is outside"),
    ],
    ids=["metadata-address", "another-node", "undeclared-service", "console-database-port", "not-a-number"],
)
def test_a_report_pointing_outside_the_jobs_allocation_or_declared_ports_is_refused_and_logged(
    running, caplog, changes, logged
):
    backend, state, claim = running
    _forge(claim, **changes)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        observation = backend.poll(key=KEY, state=state)
    assert observation.state == Observed.PENDING  # no report it believes: not reachable
    assert backend.proxy_target(key=KEY, service="lab") is None
    assert backend.port_target(key=KEY, port=20001) is None
    assert backend.ssh_target(key=KEY) is None
    refusals = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert refusals and logged in refusals[0].getMessage() and KEY in refusals[0].getMessage()


def test_a_report_another_user_wrote_is_refused(running, caplog):
    backend, state, _claim = running
    backend.tenants.owns = lambda path, uid: False  # the kernel: not the tenant's user's file
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert backend.poll(key=KEY, state=state).state == Observed.PENDING
    assert backend.proxy_target(key=KEY, service="lab") is None
    assert any("was not written by the tenant's user gpuc-t9001" in r.getMessage() for r in caplog.records)


def test_the_consoles_verified_copy_signed_with_another_key_is_refused(running, caplog):
    backend, _state, claim = running
    verified = backend._verified_path(KEY)
    report_write(verified, secret="a-key-the-tenant-made-up", report={**claim_read(claim), "host": "169.254.169.254"})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert backend.proxy_target(key=KEY, service="lab") is None
        assert backend.ssh_target(key=KEY) is None
    assert any("is not signed with the console's key" in r.getMessage() for r in caplog.records)


def test_the_job_holds_no_key(running):
    backend, _state, _claim = running
    run = backend._dir(KEY) / "run"
    secret = backend.report_secret(KEY)
    assert not (run / "report.key").exists()
    assert not any(secret in p.read_text() for p in run.iterdir() if p.is_file())
    assert not backend._verified_path(KEY).is_relative_to(backend._dir(KEY))  # outside the tenant's directory
