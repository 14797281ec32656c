"""How the Slurm backend reads Slurm's answers and the job's reports, without a cluster: GRES strings,
node states, the queue position, and signed reports (a wrong secret, a tampered body: ignored)."""

from __future__ import annotations

import json

from providers.slurm.job import report_read, report_write
from providers.slurm.records import gres_gpus, node_states, queue_position


def test_gres_gives_the_gpu_type_and_count():
    assert gres_gpus("gpu:h200:8") == ("h200", 8)
    assert gres_gpus("gpu:a100:4(S:0-1),shard:a100:16") == ("a100", 4)
    assert gres_gpus("shard:8,gpu:2") == ("", 2)
    assert gres_gpus("gpu:h200:3(IDX:0-2)") == ("h200", 3)
    assert gres_gpus("") == ("", 0)
    assert gres_gpus("(null)") == ("", 0)


def test_node_states_include_the_flags():
    assert node_states({"state": "idle", "state_flags": ["DRAIN"]}) == {"IDLE", "DRAIN"}
    assert node_states({"state": "down", "state_flags": ["NOT_RESPONDING"]}) == {"DOWN", "NOT_RESPONDING"}
    assert node_states({"state": "MIXED+DRAIN"}) == {"MIXED", "DRAIN"}


def _job(job_id, priority, submitted, state="PENDING", partition="gpu"):
    return {
        "job_id": job_id,
        "priority": priority,
        "submit_time": submitted,
        "job_state": state,
        "partition": partition,
    }


def test_the_queue_position_counts_who_slurm_considers_first():
    jobs = [
        _job(1, 100, 10, state="RUNNING"),
        _job(2, 100, 11),
        _job(3, 200, 12),  # higher priority: ahead though later
        _job(4, 100, 13),
        _job(5, 900, 5, partition="other"),  # another partition's line
    ]
    assert queue_position(jobs[3], jobs) == 3
    assert queue_position(jobs[2], jobs) == 1
    assert queue_position(jobs[1], jobs) == 2


def test_a_report_verifies_only_with_its_secret_and_untouched(tmp_path):
    path = tmp_path / "slurm-report-0.json"
    report_write(path, secret="s3cret", report={"key": "k", "ports": {"lab": 20001}})
    assert report_read(path, secret="s3cret") == {"key": "k", "ports": {"lab": 20001}}
    assert report_read(path, secret="other") is None
    envelope = json.loads(path.read_text())
    envelope["body"] = envelope["body"].replace("20001", "22")
    path.write_text(json.dumps(envelope))
    assert report_read(path, secret="s3cret") is None
    path.write_text("not json")
    assert report_read(path, secret="s3cret") is None
    assert report_read(tmp_path / "missing.json", secret="s3cret") is None
