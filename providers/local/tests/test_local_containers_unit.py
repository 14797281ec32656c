"""The container runtime's decisions, read without running podman: the command line it would run
(uid range, limits, ports on loopback only, read-only mounts, GPUs by CDI from a recorded spec), the
uid-map check that keeps a machine without its own user namespace from running, the limits a small
host caps, pull progress, and the refusal to start a machine that has no tenant."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.base import InstanceSpec, PermanentBackendError, Tenant
from providers.local.backend import LocalBackend
from providers.local.runtime.cdi import CdiError, cdi_devices
from providers.local.runtime.container_spec import Limits, limits_for, pull_progress, run_argv, uid_map_check
from providers.local.runtime.supervisor import LocalRuntimeError, Mount

RECORDED_CDI = Path(__file__).parent / "recordings/cdi"
TENANT = {"name": "gpuc-t3", "uid": 70003, "uid_base": 16777216 + 3 * 65536, "uid_count": 65536}


def _argv(**overrides):
    kwargs = {
        "name": "console-abc",
        "image": "registry.local:5000/console/minimal@sha256:" + "a" * 64,
        "tenant": TENANT,
        "limits": Limits(cpus=2, memory_gb=4, pids=512),
        "ports": {"lab": 21000, "ssh": 21001},
        "secrets_dir": "/srv/i/abc/secrets",
        "home_dir": "/srv/i/abc/home",
        **overrides,
    }
    return run_argv(**kwargs)


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_the_container_runs_in_its_tenants_uid_range_with_its_limits_and_loopback_ports():
    argv = _argv(mounts=[Mount("/v/data", "/mnt/data"), Mount("/v/ref", "/mnt/ref", read_only=True)])
    base = TENANT["uid_base"]
    assert _pairs(argv, "--uidmap") == [f"0:{base}:65536"] and _pairs(argv, "--gidmap") == [f"0:{base}:65536"]
    assert _pairs(argv, "--cpus") == ["2"] and _pairs(argv, "--memory") == ["4096m"]
    assert _pairs(argv, "--memory-swap") == ["4096m"] and _pairs(argv, "--pids-limit") == ["512"]
    assert sorted(_pairs(argv, "-p")) == ["127.0.0.1:21000:8888", "127.0.0.1:21001:2222"]
    volumes = _pairs(argv, "-v")
    assert "/srv/i/abc/secrets:/run/console-secrets:ro" in volumes
    assert "/srv/i/abc/home:/home/user" in volumes
    assert "/v/data:/mnt/data" in volumes and "/v/ref:/mnt/ref:ro" in volumes
    assert "no-new-privileges" in _pairs(argv, "--security-opt")
    assert "NET_RAW" in _pairs(argv, "--cap-drop")[0].split(",")
    assert argv[-1].endswith("@sha256:" + "a" * 64)
    assert "--entrypoint" not in argv  # the image follows the contract
    assert not any(word.startswith(("-e", "--env")) for word in argv)  # secrets never in the environment


def test_an_image_off_the_contract_gets_the_consoles_start_script_under_tini():
    argv = _argv(contract=False, tools={"console-start": "/c/console-start", "tini": "/usr/bin/tini-static"})
    assert _pairs(argv, "--entrypoint") == ['["/opt/console/tini", "-g", "--", "/opt/console/console-start"]']
    assert "/c/console-start:/opt/console/console-start:ro" in _pairs(argv, "-v")


def test_gpus_are_passed_by_cdi_as_the_recorded_spec_names_them():
    devices = cdi_devices(["1", "0"], spec_dirs=[RECORDED_CDI])
    assert devices == ["nvidia.com/gpu=1", "nvidia.com/gpu=0"]
    assert _pairs(_argv(gpu_devices=devices), "--device") == ["nvidia.com/gpu=1", "nvidia.com/gpu=0"]
    with pytest.raises(CdiError, match="GPU 7 is not in this host's CDI spec"):
        cdi_devices(["7"], spec_dirs=[RECORDED_CDI])
    # No spec (a host without NVIDIA's toolkit, simulated cards): no device, nothing refused.
    assert cdi_devices(["0"], spec_dirs=["/nonexistent/cdi"]) == []


@pytest.mark.parametrize("path", ["/run/console-secrets", "relative", "/mnt/../etc", "/mnt/a:b", "/run"])
def test_a_volume_cannot_be_mounted_over_the_secrets_or_outside_the_tree(path):
    with pytest.raises(LocalRuntimeError):
        _argv(mounts=[Mount("/v/data", path)])


def test_a_container_without_a_user_namespace_of_its_tenants_range_is_refused():
    base = TENANT["uid_base"]
    assert uid_map_check(f"         0   {base}      65536\n", uid_base=base, uid_count=65536) == ""
    assert "host's user namespace" in uid_map_check("0 0 4294967295\n", uid_base=base, uid_count=65536)
    assert "not 0" in uid_map_check(f"0 {base + 65536} 65536\n", uid_base=base, uid_count=65536)
    assert "could not be read" in uid_map_check("", uid_base=base, uid_count=65536)


def test_limits_follow_the_spec_within_what_the_host_has():
    assert limits_for(cpus=64, memory_gb=512, options={"MAX_CPUS": 2, "MAX_MEMORY_GB": 8}) == Limits(2, 8, 1024)
    assert limits_for(cpus=1, memory_gb=2, options={"MAX_CPUS": 2, "MAX_MEMORY_GB": 8}) == Limits(1, 2, 1024)
    # No figures from the catalogue: the defaults; the options may replace the spec's (a test host).
    assert limits_for(cpus=0, memory_gb=0, options={}).cpus == 1
    assert limits_for(cpus=16, memory_gb=200, options={"CPUS": 0.5, "MEMORY_GB": 1, "PIDS_LIMIT": 64}) == Limits(
        0.5, 1, 64
    )


def test_pull_progress_counts_the_layers_podman_says_are_done():
    layers = {"sha256:" + "1" * 64: 1000, "sha256:" + "2" * 64: 5000, "sha256:" + "3" * 64: 200}
    log = (
        "Trying to pull registry.local:5000/console/minimal@sha256:abc...\n"
        "Getting image source signatures\n"
        f"Copying blob sha256:{'1' * 64}\n"
        f"Copying blob sha256:{'2' * 64}\n"
        f"Copying blob {'1' * 12} done\n"
        f"Copying blob {'3' * 12} skipped: already exists\n"
    )
    assert pull_progress(log, layers) == 1200
    # What it has downloaded so far counts when it is more (podman says nothing per blob off a tty).
    assert pull_progress(log, layers, downloaded=4000) == 4000
    assert pull_progress(log, layers, downloaded=99_999) == 6200  # never past the image's size
    assert pull_progress(log + "Writing manifest to image destination\n", layers) == 6200


def test_a_machine_without_a_tenant_is_refused_before_anything_runs(tmp_path):
    backend = LocalBackend(
        alias="local",
        options={
            "ROOT": str(tmp_path),
            "NVIDIA_SMI": "/nonexistent/nvidia-smi",
            "SIMULATED_GPUS": 1,
            "ENGINE": "podman",
        },
    )
    spec = InstanceSpec(node="host", gpu_model="h200", gpu_count=1, image="pytorch-2.5-cu124", disk_gb=10)
    with pytest.raises(PermanentBackendError, match="uid range"):
        backend.create(key="k1", spec=spec)
    assert not (tmp_path / "k1").exists()
    assert Tenant(name="t", uid=1, uid_base=2).uid_count == 65536


class _NoContainers:
    """A podman that has no container (a first start still pulling its image)."""

    conf_dir = Path("/nonexistent")

    def inspect(self, kind, name):
        return None

    def missing(self):
        return ""


def test_while_the_image_is_pulled_poll_says_pulling_with_the_bytes_so_far(tmp_path):
    import json

    from providers.base import Observed
    from providers.local.runtime.containers import ContainerRuntime

    backend = LocalBackend(alias="local", options={"ROOT": str(tmp_path), "ENGINE": "podman"})
    backend._runtime = ContainerRuntime(root=tmp_path, podman=_NoContainers(), services=("lab",))
    run = tmp_path / "k1" / "run"
    run.mkdir(parents=True)
    layers = {"sha256:" + "1" * 64: 300, "sha256:" + "2" * 64: 700}
    (run / "pull.log").write_text(f"Copying blob sha256:{'1' * 64}\nCopying blob {'1' * 12} done\n")
    meta = {"key": "k1", "tenant": TENANT, "stage": "pulling", "pull": {"log": str(run / "pull.log"), "layers": layers}}
    (run / "meta.json").write_text(json.dumps(meta))

    observation = backend.poll(key="k1", state={})
    assert (observation.state, observation.stage) == (Observed.PENDING, "pulling")
    assert (observation.pull_bytes_done, observation.pull_bytes_total) == (300, 1000)
