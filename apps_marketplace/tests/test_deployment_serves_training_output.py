"""Training output feeds an app without an upload, on this host for real: a training instance writes
TensorBoard event files to a volume mounted read-write at /mnt/train (over its own sshd, as its owner
would); a TensorBoard deployment mounts the same volume read-only at /mnt/data with its log directory
there, and serves the run through the console's proxy to the deployment's key."""

from __future__ import annotations

import textwrap

import httpx
import pytest

from accounts.services import ssh_key_add
from apps_marketplace.models import App
from apps_marketplace.proxy_targets import deployment_proxy_target
from apps_marketplace.services import deployment_create
from console.hooks import proxy_target
from instances.models import GpuModel, Region
from instances.tests.conftest import committed
from providers.local.tests.local_helpers import asgi_server, wait_running
from providers.local.tests.test_local_sshd import _keypair
from storage.tests.conftest import make_volume
from storage.tests.test_local_volume_shared import Shell, _launch

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]

TRAIN = textwrap.dedent(
    """
    python3 - "$CONSOLE_VOLUME_MNT_TRAIN/runs/llama-sft" <<'PY'
    import sys, time
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    writer = EventFileWriter(sys.argv[1])
    for step in range(20):
        value = summary_pb2.Summary.Value(tag="train/loss", simple_value=2.0 / (step + 1))
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    PY
    """
)


def test_a_tensorboard_deployment_serves_what_a_training_instance_wrote_to_a_volume(
    this_host, settings, rich_alice, tmp_path, hooks_override
):
    backend = this_host(services=("ssh",))
    hooks_override(proxy_target, deployment_proxy_target)
    key, public = _keypair(tmp_path, "alice")
    laptop = ssh_key_add(user=rich_alice, name="laptop", public_key=public)
    volume = make_volume(rich_alice, region="local", size_gb=10, name="experiments")

    trainer = _launch(rich_alice, name="trainer", volumes=[(volume, "/mnt/train", "rw")], ssh_keys=[laptop])
    wrote = Shell(backend, trainer, key, tmp_path)(TRAIN)
    assert wrote.returncode == 0, wrote.stderr

    with committed():
        deployment, api_key = deployment_create(
            user=rich_alice,
            app=App.objects.get(slug="tensorboard"),
            model=None,
            parameters={"logdir": "/mnt/data/runs"},
            gpu_model=GpuModel.objects.get(slug="h200"),
            gpu_count=1,
            region=Region.objects.get(slug="local"),
            volumes=[(volume, "/mnt/data", "ro")],
        )
    instance = wait_running(deployment.instance)
    assert [(a.mount_path, a.mode) for a in instance.volume_attachments.all()] == [("/mnt/data", "ro")]

    with asgi_server() as base_url:
        app = f"{base_url}/i/{instance.pk}/app/"
        auth = {"Authorization": f"Bearer {api_key}"}
        assert httpx.get(f"{app}data/runs", headers=auth, timeout=10).json() == ["llama-sft"]
        scalars = httpx.get(
            f"{app}data/plugin/scalars/scalars",
            params={"run": "llama-sft", "tag": "train/loss"},
            headers=auth,
            timeout=10,
        ).json()
        assert [step for _wall, step, _value in scalars] == list(range(20))
        assert scalars[-1][2] == pytest.approx(0.1)
