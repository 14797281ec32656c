"""Without a cluster: a Slurm job asks for the catalogue's cores and memory for its cards
(``--cpus-per-task``, ``--mem``; ``memory_per_node`` over REST), capped by the backend's options on a
cluster of small nodes; without the catalogue's figures it asks for a core per card and Slurm's default
memory. (Slurm's cgroups enforce them: ``test_slurm_limits_on_the_cluster.py``, on the test cluster.)"""

from __future__ import annotations

from providers import InstanceSpec
from providers.slurm.tests.slurm_fake import cli_backend, spec


def _submitted(tmp_path, spec: InstanceSpec, **options) -> tuple[str, ...]:
    backend, cli = cli_backend(tmp_path, **options)
    backend.create(key="k", spec=spec)
    return cli.calls[-1]


def _spec(**kwargs) -> InstanceSpec:
    return spec(gpu_count=2, **kwargs)


def test_the_job_asks_for_the_catalogues_cores_and_memory(tmp_path):
    args = _submitted(tmp_path, _spec(cpus=15.5, memory_gb=480))
    assert "--cpus-per-task=16" in args and "--mem=491520M" in args


def test_small_nodes_cap_them(tmp_path):
    args = _submitted(tmp_path, _spec(cpus=32, memory_gb=480), MAX_CPUS=4, MAX_MEMORY_GB=1.5)
    assert "--cpus-per-task=4" in args and "--mem=1536M" in args


def test_without_the_catalogues_figures_a_core_per_card_and_slurms_default_memory(tmp_path):
    args = _submitted(tmp_path, _spec())
    assert "--cpus-per-task=2" in args and not any(a.startswith("--mem") for a in args)
