"""The owner's secrets inside a real container (podman): each chosen secret is a file of
/run/console-secrets readable by the instance's user, one asked for as a variable is in the servers'
environment and in an SSH-style login shell, and none is in the container's own configuration (which a
saved image would keep); a stop leaves none on the host. Slow (a container boot): run on its own."""

from __future__ import annotations

import json

import pytest

from instances.models import GpuModel, Image, Region
from instances.services import LaunchRequest, instance_launch, instance_stop, instances_experiment_runs_refresh
from instances.tests.conftest import committed
from providers.local.tests.local_helpers import wait_running
from providers.local.tests.test_local_containers import (  # noqa: F401  (fixtures)
    BOOT_S,
    _exec,
    container_images,
    in_containers,
)
from vault.services import secret_set

pytestmark = [pytest.mark.local, pytest.mark.containers, pytest.mark.django_db(transaction=True)]

WANDB = "wandb-live-0123456789abcdef'quote\"$HOME"
HF = "hf_live_file_only_token"

# Every process of the instance's user (whose environments that user may read): which carry WANDB_API_KEY.
ENVIRONS = (
    "import os\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        env = open(f'/proc/{pid}/environ', 'rb').read().split(b'\\0')\n"
    "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ')[:60]\n"
    "    except OSError:\n"
    "        continue\n"
    "    print(cmd.decode(errors='replace'), any(e.startswith(b'WANDB_API_KEY=') for e in env))\n"
)

RUN_URL = "https://wandb.ai/lab/demo/runs/abc123"
# JupyterLab's environment, one variable a line.
LAB_ENV = (
    "import os\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
    "        env = open(f'/proc/{pid}/environ', 'rb').read().split(b'\\0')\n"
    "    except OSError:\n"
    "        continue\n"
    "    if b'jupyter' in cmd:\n"
    "        print(b'\\n'.join(env).decode(errors='replace'))\n"
    "        break\n"
)
# A stand-in for the wandb package (not in the test image, and W&B cannot be reached from here): its
# ``init`` returns a run with W&B's public attributes, as ``wandb.init`` does.
WANDB_MODULE = f"""class Run:
    url, name, id, entity = {RUN_URL!r}, "lucky-run", "abc123", "lab"


def init(project=None, **kwargs):
    run = Run()
    run.project = project
    return run
"""
TRAIN = 'import wandb\nprint(wandb.init(project="demo").name)\n'
FAKE_WANDB = (
    "import os\n"
    "home = os.path.expanduser('~')\n"
    "os.makedirs(home + '/pkgs/wandb', exist_ok=True)\n"
    f"open(home + '/pkgs/wandb/__init__.py', 'w').write({WANDB_MODULE!r})\n"
    f"open(home + '/train.py', 'w').write({TRAIN!r})\n"
)


def test_files_variables_and_nothing_in_the_containers_configuration(in_containers, rich_alice, client):  # noqa: F811
    backend = in_containers(services=("lab", "ssh"))
    wandb, _ = secret_set(owner=rich_alice, actor=rich_alice, name="WANDB_API_KEY", value=WANDB)
    hf, _ = secret_set(owner=rich_alice, actor=rich_alice, name="HF_TOKEN", value=HF)
    with committed():
        instance = instance_launch(
            LaunchRequest(
                user=rich_alice,
                region=Region.objects.get(slug="local"),
                gpu_model=GpuModel.objects.get(slug="h200"),
                gpu_count=1,
                image=Image.objects.get(slug="pytorch-2.5-cu124"),
                disk_gb=20,
                secrets=[(wandb, True), (hf, False)],
            )
        )
    wait_running(instance, timeout=BOOT_S)
    key = instance.key
    runtime = backend.runtime

    assert _exec(backend, key, "cat /run/console-secrets/WANDB_API_KEY").stdout == WANDB
    assert _exec(backend, key, "cat /run/console-secrets/HF_TOKEN").stdout == HF
    login = _exec(backend, key, "bash -lc 'printf %s \"$WANDB_API_KEY|${HF_TOKEN-unset}\"'")
    assert login.stdout == WANDB + "|unset", (login.stdout, login.stderr)
    # JupyterLab (a server of the contract) runs with the variable; the container's own config has none.
    environs = runtime.podman.run(
        "exec", "--user", "1000", runtime.container_name(key), "python3", "-c", ENVIRONS
    ).stdout
    assert any("jupyter" in line and line.endswith("True") for line in environs.splitlines()), environs
    config = json.dumps(runtime.podman.inspect("container", runtime.container_name(key)))
    assert "wandb-live" not in config and HF not in config
    assert "wandb-live" not in json.dumps(runtime.meta(key)) and "wandb-live" not in json.dumps(instance.backend_state)

    # W&B: the key reaches wandb as its variable, and a run that a program starts (here a stand-in for
    # the wandb package, in the user's own folder) is linked from the instance's page through the
    # console's hook, which JupyterLab's and log-in shells' Python load.
    lab_env = runtime.podman.run("exec", "--user", "1000", runtime.container_name(key), "python3", "-c", LAB_ENV).stdout
    assert "PYTHONPATH=/opt/console/python" in lab_env.splitlines(), lab_env
    runtime.podman.run("exec", "--user", "1000", runtime.container_name(key), "python3", "-c", FAKE_WANDB)
    trained = _exec(backend, key, "bash -lc 'PYTHONPATH=$PYTHONPATH:$HOME/pkgs python3 $HOME/train.py'")
    assert trained.stdout.strip() == "lucky-run", (trained.stdout, trained.stderr)
    runs = backend.experiment_runs(key=key, state=instance.backend_state)
    assert [(r["url"], r["name"], r["project"]) for r in runs] == [(RUN_URL, "lucky-run", "demo")]
    assert instances_experiment_runs_refresh() == 1  # the worker's periodic pass saves them for the page
    client.force_login(rich_alice)
    page = client.get(f"/instances/{instance.pk}/").content.decode()
    assert f'href="{RUN_URL}"' in page and "lucky-run" in page
    assert [r["url"] for r in client.get(f"/api/v1/instances/{instance.pk}/runs/").json()] == [RUN_URL]

    with committed():
        instance_stop(instance=instance)
    folder = runtime.paths(key).secrets
    assert not (folder / "WANDB_API_KEY").exists() and not (folder / "user.env").exists()
