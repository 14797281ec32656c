"""The owner's secrets on the container engine, without a container: the folder's files (one per secret,
``user.env`` for the variables, sourced by a shell to exactly the value), a choice that replaces the
last, a stop that leaves none on the host's disk, and the backend handing them to the runtime at each
boot without putting a value in the state it returns. (``test_local_containers.py`` checks them inside
a running container.)"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from providers.base import InstanceSpec, PermanentBackendError, SecretValue, Tenant
from providers.local.backend import LocalBackend
from providers.local.runtime.container_files import (
    secrets_folder_clear_user,
    secrets_folder_write,
    user_secret_files,
)
from providers.local.runtime.containers import ContainerRuntime
from providers.local.runtime.supervisor import LocalRuntimeError

AWKWARD = 'it\'s a "token"\nwith $HOME and `backticks`\\'


def test_the_variables_file_gives_back_each_value_exactly(tmp_path):
    files = user_secret_files(
        [{"name": "WANDB_API_KEY", "value": AWKWARD, "env": True}, {"name": "HF_TOKEN", "value": "hf_1", "env": False}]
    )
    assert files["WANDB_API_KEY"] == AWKWARD and files["HF_TOKEN"] == "hf_1"
    env_file = tmp_path / "user.env"
    env_file.write_text(files["user.env"])
    shown = subprocess.run(
        ["/bin/sh", "-c", '. "$0"; printf %s "$WANDB_API_KEY"; printf "|%s" "${HF_TOKEN-unset}"', str(env_file)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    assert shown == AWKWARD + "|unset"  # HF_TOKEN is a file only


@pytest.mark.parametrize("name", ["../etc/passwd", "lab_token", "user.env", "A/B", ""])
def test_a_name_that_is_not_a_variable_is_refused(name):
    with pytest.raises(LocalRuntimeError):
        user_secret_files([{"name": name, "value": "x", "env": False}])


@pytest.mark.skipif(os.geteuid() != 0, reason="the folder is handed to the tenant's uid (root only)")
def test_the_folder_holds_the_chosen_secrets_only_and_a_stop_clears_them(tmp_path):
    folder, owner = tmp_path / "secrets", 101000
    console = {"console.env": "CONSOLE_SERVICES='lab'\n", "lab_token": "t\n"}
    first = user_secret_files([{"name": "A_KEY", "value": "a", "env": True}, {"name": "B_KEY", "value": "b"}])
    secrets_folder_write(folder, {**console, **first}, owner=owner)
    info = os.stat(folder / "A_KEY")
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (owner, 0o400)
    assert sorted(os.listdir(folder)) == ["A_KEY", "B_KEY", "console.env", "lab_token", "user.env"]
    # A repair without a spec keeps them; a new choice replaces them.
    secrets_folder_write(folder, console, owner=owner, keep_user_secrets=True)
    assert "B_KEY" in os.listdir(folder)
    secrets_folder_write(folder, {**console, **user_secret_files([{"name": "B_KEY", "value": "b2"}])}, owner=owner)
    assert sorted(os.listdir(folder)) == ["B_KEY", "console.env", "lab_token", "user.env"]
    assert (folder / "B_KEY").read_text() == "b2" and "export " not in (folder / "user.env").read_text()
    secrets_folder_clear_user(folder)
    assert sorted(os.listdir(folder)) == ["console.env", "lab_token"]


class _NoContainers:
    conf_dir = Path("/nonexistent")

    def inspect(self, kind, name):
        return None

    def missing(self):
        return ""


TENANT = Tenant(name="t1", uid=70000, uid_base=200000)


def _backend(tmp_path, monkeypatch, calls: list) -> LocalBackend:
    backend = LocalBackend(
        alias="local",
        options={"ROOT": str(tmp_path), "ENGINE": "podman", "NVIDIA_SMI": "/nonexistent", "SIMULATED_GPUS": 2},
    )
    runtime = ContainerRuntime(root=tmp_path, podman=_NoContainers(), services=("lab",))

    def start(key, **kwargs):
        calls.append(("start", kwargs.get("user_secrets")))
        return {"version": 1, "ports": {}, "dir": str(tmp_path / key)}

    def restart(key, **kwargs):
        calls.append(("restart", kwargs.get("user_secrets")))
        return {"ports": {}}

    monkeypatch.setattr(runtime, "start", start)
    monkeypatch.setattr(runtime, "restart", restart)
    monkeypatch.setattr(runtime, "meta", lambda key: {"gpus": []})
    monkeypatch.setattr(runtime, "oom_acknowledge", lambda key: None)
    backend._runtime = runtime
    return backend


def test_the_backend_hands_the_values_over_at_each_boot_and_keeps_none(tmp_path, monkeypatch):
    calls: list = []
    backend = _backend(tmp_path, monkeypatch, calls)
    spec = InstanceSpec(
        node="host",
        gpu_model="h200",
        gpu_count=1,
        image="pytorch-2.5-cu124",
        disk_gb=10,
        tenant=TENANT,
        secrets=(SecretValue(name="WANDB_API_KEY", value="w-123", env=True),),
    )
    states = [
        backend.create(key="k1", spec=spec),
        backend.start(key="k1", state={}, node="host", spec=spec),
        backend.restart(key="k1", state={}, spec=spec),
        backend.start(key="k1", state={}, node="host"),  # a repair without a spec
    ]
    chosen = [{"name": "WANDB_API_KEY", "value": "w-123", "env": True}]
    assert calls == [("start", chosen), ("start", chosen), ("restart", chosen), ("start", None)]
    assert all("w-123" not in json.dumps(state) for state in states)


def test_the_process_engine_refuses_a_machine_with_secrets(tmp_path):
    backend = LocalBackend(alias="local", options={"ROOT": str(tmp_path), "ENGINE": "process"})
    spec = InstanceSpec(
        node="host",
        gpu_model="h200",
        gpu_count=1,
        image="x",
        disk_gb=10,
        secrets=(SecretValue(name="A", value="v"),),
    )
    with pytest.raises(PermanentBackendError, match="secrets"):
        backend.create(key="k1", spec=spec)
