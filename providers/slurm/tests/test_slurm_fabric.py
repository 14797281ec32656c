"""Without a cluster: what a multi-node Slurm job asks of a real fabric (``--switches`` with the topology
plugin, the site's cluster arguments) and the NCCL environment its ranks get. A single machine asks for
none of it. (What the fabric then does, InfiniBand and all, cannot be tested here: see the README.)"""

from __future__ import annotations

import pytest

from providers import PermanentBackendError
from providers.slurm.tests.slurm_fake import cli_backend as _backend
from providers.slurm.tests.slurm_fake import spec as _spec

KEY = "6f1c2a9b-03de-4f00-9000-000000000003"
FABRIC = {
    "TOPOLOGY_SWITCHES": 1,
    "SWITCHES_WAIT": "10:00",
    "NCCL_ENV": {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_HCA": "mlx5_0,mlx5_1"},
    "CLUSTER_SBATCH_ARGS": ["--exclusive"],
}


def test_a_cluster_asks_for_one_switch_and_its_ranks_get_the_nccl_environment(tmp_path):
    backend, cli = _backend(tmp_path, **FABRIC)
    backend.create(key=KEY, spec=_spec(nodes=4, peer_nodes=("a", "b", "c")))
    args, script = cli.calls[-1], cli.scripts[-1]
    assert "--nodes=4" in args
    assert "--switches=1@10:00" in args
    assert "--exclusive" in args
    assert "export NCCL_SOCKET_IFNAME=ib0\n" in script
    assert "export NCCL_IB_HCA=mlx5_0,mlx5_1\n" in script
    assert script.index("NCCL_IB_HCA") < script.index("srun")  # exported before the ranks start


def test_a_single_machine_asks_for_no_fabric(tmp_path):
    backend, cli = _backend(tmp_path, **FABRIC)
    backend.create(key=KEY, spec=_spec())
    args, script = cli.calls[-1], cli.scripts[-1]
    assert not any(a.startswith("--switches") for a in args)
    assert "--exclusive" not in args
    assert "NCCL_" not in script


def test_without_the_topology_option_no_switches_are_asked_for(tmp_path):
    backend, cli = _backend(tmp_path)
    backend.create(key=KEY, spec=_spec(nodes=2, peer_nodes=("a",)))
    assert not any(a.startswith("--switches") for a in cli.calls[-1])
    assert "NCCL_" not in cli.scripts[-1]


def test_a_switch_count_without_a_wait_is_passed_alone(tmp_path):
    backend, cli = _backend(tmp_path, TOPOLOGY_SWITCHES=2)
    backend.create(key=KEY, spec=_spec(nodes=2, peer_nodes=("a",)))
    assert "--switches=2" in cli.calls[-1]


def test_an_nccl_value_is_quoted_for_the_shell_and_a_bad_name_is_refused(tmp_path):
    backend, cli = _backend(tmp_path, NCCL_ENV={"NCCL_DEBUG_SUBSYS": "INIT,NET; rm -rf /"})
    backend.create(key=KEY, spec=_spec(nodes=2, peer_nodes=("a",)))
    assert "export NCCL_DEBUG_SUBSYS='INIT,NET; rm -rf /'\n" in cli.scripts[-1]
    backend, _cli = _backend(tmp_path, NCCL_ENV={"NCCL X": "1"})
    with pytest.raises(PermanentBackendError):
        backend.create(key="other", spec=_spec(nodes=2, peer_nodes=("a",)))


def test_slurm_clusters_are_not_resized(tmp_path):
    backend, _cli = _backend(tmp_path)
    assert not backend.supports_cluster_resize
