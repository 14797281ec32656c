"""slurmrestd's API versions, each against answers in its own format (``fixtures/<version>/``, where
each shape comes from is in ``fixtures/README.md``): the backend speaks the newest version the server
offers, writes a job in it, and reads every version's jobs and nodes as the same cluster. The same
answers through the command line (``squeue --json`` writes the same JSON as slurmrestd, release by
release) read the same too.

The seam is ``httpx.request``, which the REST transport calls for every request: a recorded server
answers it, only under its own version's prefix."""

from __future__ import annotations

import json
import math
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from providers import MachineInfo, NodeInfo, Observed, PermanentBackendError, TransientBackendError
from providers.slurm.backend import SlurmBackend
from providers.slurm.cli import SlurmCli
from providers.slurm.records import job_record, job_state, node_record, slurm_count, slurm_number
from providers.slurm.tests.slurm_fake import TENANT, FakeTenantAccounts, spec

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = ("v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")


def key(n: int) -> str:
    return f"6f1c2a9b-03de-4f00-9000-0000000010{n:02d}"


class RecordedSlurmrestd:
    """slurmrestd answering from ``fixtures/<version>/``: its OpenAPI document, and its jobs, nodes,
    submissions and cancellations under ``/slurm/<version>/`` only (any other prefix: 404)."""

    def __init__(self, version: str, *, document: dict | None = None) -> None:
        self.version = version
        self.document = document or self._load("openapi.json")
        self.requests: list[tuple[str, str, dict | None, str]] = []

    def _load(self, name: str) -> dict:
        return json.loads((FIXTURES / self.version / name).read_text())

    def __call__(self, method: str, url: str, *, json=None, headers=None, timeout=None) -> httpx.Response:
        path = urlsplit(url).path
        self.requests.append((method, path, json, (headers or {}).get("X-SLURM-USER-NAME", "")))
        if path == "/openapi/v3":
            return httpx.Response(200, json=self.document)
        prefix = f"/slurm/{self.version}"
        if not path.startswith(f"{prefix}/"):
            return httpx.Response(404, text="Unable to find requested URL")
        route = (method, path.removeprefix(prefix).rstrip("/"))
        if route == ("GET", "/jobs"):
            return httpx.Response(200, json=self._load("jobs.json"))
        if route == ("GET", "/nodes"):
            return httpx.Response(200, json=self._load("nodes.json"))
        if route == ("POST", "/job/submit"):
            return httpx.Response(200, json=self._load("job_submit.json"))
        if route == ("DELETE", "/job/999999"):
            return httpx.Response(500, json=self._load("job_cancel_unknown.json"))
        if method == "DELETE" and route[1].startswith("/job/"):
            return httpx.Response(200, json={"meta": self._load("jobs.json")["meta"], "errors": []})
        return httpx.Response(404, text="Unable to find requested URL")

    def api_requests(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p, _body, _user in self.requests if not p.startswith("/openapi")]


@pytest.fixture
def slurmrestd(monkeypatch):
    """``slurmrestd("v0.0.41")``: that recorded server behind every request the transport makes."""

    def serve(version: str, **kwargs) -> RecordedSlurmrestd:
        server = RecordedSlurmrestd(version, **kwargs)
        monkeypatch.setattr(httpx, "request", server)
        return server

    return serve


def rest_backend(tmp_path, **options) -> SlurmBackend:
    (tmp_path / "jwt.key").write_bytes(b"k" * 32)
    backend = SlurmBackend(
        alias="slurm",
        options={
            "ROOT": str(tmp_path / "instances"),
            "SERVICES": [],
            "REST_URL": "http://slurm-head:6820",
            "REST_USER": "console",
            "JWT_KEY_FILE": str(tmp_path / "jwt.key"),
            "REGION": "hpc",
            **options,
        },
    )
    backend.tenants = FakeTenantAccounts()
    return backend


# The scenario every version's answers describe (fixtures/README.md).
NODES = [
    NodeInfo(name="gpu01", region="hpc", gpu_model="h200", cards=8, healthy=True, free_cards=0, detail=""),
    NodeInfo(
        name="gpu02", region="hpc", gpu_model="h200", cards=8, healthy=False, free_cards=4, detail="DRAIN, maintenance"
    ),
    NodeInfo(
        name="gpu03",
        region="hpc",
        gpu_model="h200",
        cards=8,
        healthy=False,
        free_cards=8,
        detail="DOWN+NOT_RESPONDING, Not responding",
    ),
]
MACHINES = {
    key(1): ("gpu[01-02]", 16, Observed.RUNNING, "RUNNING"),
    key(2): ("", 4, Observed.PENDING, "PENDING"),
    key(3): ("", 4, Observed.PENDING, "PENDING"),
    key(4): ("gpu03", 2, Observed.PREEMPTED, "RUNNING"),  # in its grace period
    key(5): ("", 2, Observed.PREEMPTED, "PENDING"),  # requeued, waiting to run again
    key(6): ("gpu03", 1, Observed.PENDING, "COMPLETING"),  # Slurm is ending it
}


def _machines(machines: list[MachineInfo]) -> dict:
    return {m.key: (m.node, m.cards, m.observed, m.extra["state"]) for m in machines}


@pytest.mark.parametrize("version", VERSIONS)
def test_the_backend_speaks_the_newest_version_the_server_offers_and_asks_once(tmp_path, slurmrestd, version):
    server = slurmrestd(version)
    backend = rest_backend(tmp_path)
    backend.nodes()
    backend.machines()
    assert backend.api.dialect().version == version
    assert [p for _m, p, _b, _u in server.requests if p.startswith("/openapi")] == ["/openapi/v3"]  # asked once
    assert all(p.startswith(f"/slurm/{version}/") for _m, p in server.api_requests())
    # Reads go as REST_USER, never as a tenant or root.
    assert {user for *_rest, user in server.requests} == {"console"}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_s_nodes_read_as_the_same_cluster(tmp_path, slurmrestd, version):
    slurmrestd(version)
    assert rest_backend(tmp_path).nodes() == NODES  # cpu01 has no GPUs: not the console's to rent


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_s_jobs_read_as_the_same_machines(tmp_path, slurmrestd, version):
    slurmrestd(version)
    backend = rest_backend(tmp_path)
    assert _machines(backend.machines()) == MACHINES  # someone else's job is not the console's

    queued = backend.poll(key=key(3), state={"job_id": 1003, "restarts": 0})
    assert (queued.state, queued.detail) == (Observed.PENDING, "Queued: position 2, reason Priority")
    requeued = backend.poll(key=key(5), state={"job_id": 1005, "restarts": 0, "interruptible": True})
    assert (requeued.state, requeued.detail) == (Observed.PREEMPTED, "Requeued by Slurm: position 1, reason BeginTime")
    grace = backend.poll(key=key(4), state={"job_id": 1004, "restarts": 0, "interruptible": True})
    assert grace.state == Observed.PREEMPTED and "checkpointing" in grace.detail
    ending = backend.poll(key=key(6), state={"job_id": 1006, "restarts": 0})
    assert (ending.state, ending.detail) == (Observed.PENDING, "Slurm is ending the job")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_job_is_written_in_the_servers_version_and_submitted_as_its_tenant(tmp_path, slurmrestd, version):
    server = slurmrestd(version)
    backend = rest_backend(tmp_path, TOPOLOGY_SWITCHES=1, PARTITION="gpu")
    state = backend.create(
        key=key(10),
        spec=spec(nodes=2, node="gpu01", peer_nodes=("gpu02",), pin=True, memory_gb=4, interruptible=True),
    )
    assert state["job_id"] == 1010
    [(_method, path, body, user)] = [r for r in server.requests if r[0] == "POST"]
    assert (path, user) == (f"/slurm/{version}/job/submit", TENANT.name)
    job = body["job"]
    assert job["name"] == f"console-{key(10)}" and job["tasks"] == 2 and job["tasks_per_node"] == 1
    assert job["partition"] == "spot" and job["requeue"] is True and job["required_nodes"] == ["gpu01", "gpu02"]
    assert job["current_working_directory"].endswith(f"{key(10)}/home")
    if version == "v0.0.38":
        # v0.0.38_job_submission: the script beside the job; plain numbers; gres; an environment object.
        assert body["script"].startswith("#!/bin/bash\n") and "script" not in job
        assert job["nodes"] == 2 and job["gres"] == "gpu:h200:8" and "tres_per_node" not in job
        assert job["memory_per_node"] == 4096 and job["required_switches"] == 1
        assert job["environment"] == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        assert job["open_mode"] == "append"
    else:
        # v0.0.4x_job_submit_req: the script in the job; number objects; tres_per_node; lists.
        assert set(body) == {"job"} and job["script"].startswith("#!/bin/bash\n")
        assert job["nodes"] == "2" and job["minimum_nodes"] == job["maximum_nodes"] == 2
        assert job["tres_per_node"] == "gres/gpu:h200:8" and "gres" not in job
        assert job["memory_per_node"] == {"set": True, "infinite": False, "number": 4096}
        assert job["required_switches"] == {"set": True, "infinite": False, "number": 1}
        assert job["environment"] == ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"]
        assert job["open_mode"] == ["APPEND"]


@pytest.mark.parametrize("version", VERSIONS)
def test_cancelling_a_job_slurm_no_longer_knows_counts_as_done(tmp_path, slurmrestd, version):
    server = slurmrestd(version)
    backend = rest_backend(tmp_path)
    backend.api.cancel(999999, user=TENANT.name)  # HTTP 500 "Invalid job id specified": already gone
    assert server.requests[-1][1:] == (f"/slurm/{version}/job/999999", None, TENANT.name)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_command_line_reads_the_same_answers(tmp_path, version):
    """``squeue --json``/``sinfo --json`` write the data_parser's JSON from 23.11 on, as slurmrestd does."""

    class RecordedCli(SlurmCli):
        def _run(self, tool: str, *args: str, stdin: str | None = None) -> str:
            return (FIXTURES / version / {"squeue": "jobs.json", "sinfo": "nodes.json"}[tool]).read_text()

    backend = SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "SERVICES": [], "REGION": "hpc"})
    backend.api = RecordedCli()
    assert backend.nodes() == NODES
    assert _machines(backend.machines()) == MACHINES


def test_a_server_that_offers_none_of_the_consoles_versions_says_which_it_offers(tmp_path, slurmrestd):
    document = {"openapi": "3.0.2", "paths": {"/slurm/v0.0.39/jobs": {}, "/slurmdb/v0.0.39/jobs": {}}}
    slurmrestd("v0.0.39", document=document)
    with pytest.raises(PermanentBackendError, match=r"speaks \(v0\.0\.44.*v0\.0\.38\); it offers v0\.0\.39\."):
        rest_backend(tmp_path).nodes()


def test_rest_api_pins_a_version_and_the_server_is_not_asked(tmp_path, slurmrestd):
    server = slurmrestd("v0.0.41")
    backend = rest_backend(tmp_path, REST_API="v0.0.41")
    assert backend.nodes() == NODES
    assert not [p for _m, p, _b, _u in server.requests if p.startswith("/openapi")]
    with pytest.raises(ImproperlyConfigured, match=r"REST_API .v0\.0\.39."):
        rest_backend(tmp_path, REST_API="v0.0.39")


def test_a_server_upgraded_under_the_console_is_asked_again(tmp_path, slurmrestd):
    slurmrestd("v0.0.41")
    backend = rest_backend(tmp_path)
    assert backend.api.dialect().version == "v0.0.41"
    slurmrestd("v0.0.42")  # 25.11 removed v0.0.40 and deprecates v0.0.41; say the site went past both
    backend.api.dialect()  # kept: nothing has failed yet
    with pytest.raises(TransientBackendError, match=r"no longer serves v0\.0\.41"):
        backend.machines()  # a poll says UNKNOWN; the reconciler comes back
    assert _machines(backend.machines()) == MACHINES
    assert backend.api.dialect().version == "v0.0.42"


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (502, None, TransientBackendError),  # a proxy in front, and the server behind it down
        (
            500,
            {"errors": [{"error": "Unable to contact slurm controller (connect failure)", "error_number": 1}]},
            TransientBackendError,
        ),
        (500, {"errors": [{"error": "Invalid partition name specified", "error_number": 2000}]}, PermanentBackendError),
        (429, None, TransientBackendError),
        (
            400,
            {"errors": [{"description": "Unable to parse job", "error_number": 9200, "error": "Unspecified error"}]},
            PermanentBackendError,
        ),
    ],
)
def test_slurm_saying_no_is_permanent_and_the_server_in_trouble_is_transient(
    tmp_path, monkeypatch, status, body, error
):
    def answer(method, url, **_kwargs):
        if urlsplit(url).path == "/openapi/v3":
            return httpx.Response(200, json={"paths": {"/slurm/v0.0.41/jobs/": {}}})
        return httpx.Response(status, json=body) if body else httpx.Response(status, text="")

    monkeypatch.setattr(httpx, "request", answer)
    with pytest.raises(error):
        rest_backend(tmp_path).api.jobs()


# --- one place reads a number, whichever form --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "number", "count"),
    [
        (8, 8, 8),
        ({"set": True, "infinite": False, "number": 8}, 8, 8),
        ({"set": False, "infinite": False, "number": 0}, None, 0),  # NO_VAL: no value
        ({"set": False, "infinite": True, "number": 0}, math.inf, 0),  # unlimited
        ({"set": True, "infinite": False, "number": 1.5}, 1.5, 1),
        ({"number": 3}, 3, 3),  # a writer that leaves "set" out
        (None, None, 0),
        ("12", 12, 12),
        ("n/a", None, 0),
        (True, None, 0),
    ],
)
def test_a_slurm_number_reads_in_either_form(value, number, count):
    assert slurm_number(value) == number
    assert slurm_count(value) == count


@pytest.mark.parametrize(
    ("state", "word"),
    [
        ("RUNNING", "RUNNING"),
        (["RUNNING"], "RUNNING"),
        (["CANCELLED", "COMPLETING"], "COMPLETING"),  # as Slurm 22.05's squeue said it
        (["PENDING", "REQUEUED"], "REQUEUED"),
        (["RUNNING", "CONFIGURING"], "CONFIGURING"),
        (["PENDING", "EXPEDITING"], "PENDING"),  # a flag v0.0.44 added (25.11): the base state still reads
        ([], ""),
    ],
)
def test_a_jobs_state_reads_as_one_word(state, word):
    assert job_state({"job_state": state}) == word
    assert job_record({"job_state": state})["job_state"] == word


def test_a_record_keeps_what_the_backend_does_not_read():
    job = job_record({"job_id": 7, "priority": {"set": True, "number": 5}, "tres_per_node": "gres/gpu:2", "qos": "x"})
    assert job == {"job_id": 7, "priority": 5, "tres_per_node": "gres:gpu:2", "qos": "x", "job_state": ""}
    node = node_record({"name": "gpu01", "state": ["IDLE", "DRAIN"], "gres": "gpu:8"})
    assert node == {"name": "gpu01", "state": "idle", "state_flags": ["DRAIN"], "gres": "gpu:8"}
    assert node_record({"state": "mixed", "state_flags": ["DRAIN"]})["state_flags"] == ["DRAIN"]
