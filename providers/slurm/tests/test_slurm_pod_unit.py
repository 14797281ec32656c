"""The container engine of Slurm jobs without a cluster: which engine a backend's options choose, the
``podman run`` the job makes (the contract's, in the tenant's own user namespace, limits left to the
job's cgroup), the tenant's podman settings, and a runtime folder someone else made refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers.base import InstanceSpec, Tenant
from providers.local.runtime.base import LocalRuntimeError
from providers.local.runtime.container_spec import run_argv
from providers.slurm import pod
from providers.slurm.backend import SlurmBackend

TENANT = Tenant(name="gpuc-t7", uid=70007, uid_base=1 << 24, uid_count=65536)
KEY = "6f1c2a9b-03de-4f00-9000-000000000001"


def test_the_engine_is_podman_unless_the_region_asks_for_processes(tmp_path):
    default = SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "SERVICES": []})
    assert "--engine=podman" in default._script(KEY, tenant=TENANT)
    process = SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "SERVICES": [], "ENGINE": "process"})
    assert "--engine=process" in process._script(KEY, tenant=TENANT)
    with pytest.raises(ImproperlyConfigured, match="ENGINE"):
        SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "ENGINE": "docker"})


def test_the_job_runs_the_pinned_digest_else_the_slug_mapping(tmp_path):
    backend = SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "IMAGES": {"cuda": "reg:5000/cuda:1"}})
    spec = InstanceSpec(node="", gpu_model="h200", gpu_count=1, image="cuda", disk_gb=20, tenant=TENANT)
    assert backend.image_for(spec) == "reg:5000/cuda:1"
    pinned = InstanceSpec(**{**spec.__dict__, "image_ref": "reg:5000/minimal@sha256:" + "a" * 64})
    assert backend.image_for(pinned) == pinned.image_ref


def test_the_rootless_run_keeps_the_contract_and_leaves_limits_to_the_cgroup():
    argv = run_argv(
        name="console-k",
        image="reg/x@sha256:1",
        tenant={},
        limits=None,
        ports={"lab": 21000},
        secrets_dir="/i/k/secrets",
        home_dir="/i/k/home",
        userns=list(pod.USERNS),
        lifetime=("--rm", "--replace"),
    )
    joined = " ".join(argv)
    assert "--userns keep-id:uid=1000,gid=1000" in joined and "--uidmap" not in joined
    assert "--memory" not in joined and "--cpus" not in joined
    assert "--rm --replace" in joined
    assert "-p 127.0.0.1:21000:8888" in joined
    assert "-v /i/k/secrets:/run/console-secrets:ro" in joined and "-v /i/k/home:/home/user" in joined
    assert "/run:rw,exec,nosuid,nodev" in joined and argv[-1] == "reg/x@sha256:1"


def test_the_tenants_podman_settings_are_written_once(tmp_path):
    assert pod.podman_config_write(tmp_path, uid=70007) is True
    storage = (tmp_path / ".config/containers/storage.conf").read_text()
    assert f'graphroot = "{tmp_path}/.local/share/containers/storage"' in storage
    assert 'runroot = "/tmp/console-podman-70007/containers"' in storage
    assert 'runtime = "runc"' in (tmp_path / ".config/containers/containers.conf").read_text()
    assert pod.podman_config_write(tmp_path, uid=70007) is False


def test_a_runtime_folder_made_by_someone_else_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir(mode=0o755)
    monkeypatch.setattr(pod, "runtime_dir_default", lambda uid: str(folder))
    with pytest.raises(LocalRuntimeError, match="not this tenant's own"):
        pod.runtime_dir_ensure(os.getuid() + 1)
    os.chmod(folder, 0o700)
    assert pod.runtime_dir_ensure(os.getuid()) == Path(folder)
