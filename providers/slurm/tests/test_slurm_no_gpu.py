"""A machine without GPU (no-GPU mode: ``gpu_count`` 0) asks Slurm for no GRES at all, over the command
line and over REST in every version, with the small CPU and memory allowance it was given."""

from __future__ import annotations

import pytest

from providers.slurm.tests.slurm_fake import cli_backend, spec
from providers.slurm.tests.test_slurm_rest_versions import VERSIONS, key, rest_backend, slurmrestd  # noqa: F401

NO_GPU = {"gpu_count": 0, "cpus": 0.5, "memory_gb": 2}


def test_the_command_line_asks_for_no_gres_and_the_allowance(tmp_path):
    backend, cli = cli_backend(tmp_path)
    state = backend.create(key="k", spec=spec(**NO_GPU))
    args = cli.calls[-1]
    assert not any(a.startswith("--gres") for a in args)
    assert "--cpus-per-task=1" in args and "--mem=2048M" in args
    assert state["gpu_count"] == 0


def test_a_start_without_its_spec_keeps_running_without_gpu(tmp_path):
    backend, cli = cli_backend(tmp_path)
    state = backend.create(key="k", spec=spec(**NO_GPU))
    backend.start(key="k", state={**state, "stopped": True}, node="")  # its job ended: a new one
    sbatch = [call for call in cli.calls if call[0] == "sbatch"]
    assert len(sbatch) == 2 and not any(a.startswith("--gres") for a in sbatch[-1])


@pytest.mark.parametrize("version", VERSIONS)
def test_rest_asks_for_no_gres_in_every_version(tmp_path, slurmrestd, version):  # noqa: F811
    server = slurmrestd(version)
    backend = rest_backend(tmp_path)
    backend.create(key=key(10), spec=spec(**NO_GPU))
    [(_method, _path, body, _user)] = [r for r in server.requests if r[0] == "POST"]
    assert "gres" not in body["job"] and "tres_per_node" not in body["job"]
