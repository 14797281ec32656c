"""On this host, for real: a training instance writes a file to a volume mounted read-write at /mnt/train;
another instance, with the same volume mounted read-only at /models/mine, reads the same bytes and cannot
write there. Both log in over their own sshd with the key chosen at launch, as a user would."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounts.services import ssh_key_add
from instances.models import GpuModel, Image, Region
from instances.services import LaunchRequest, instance_launch, instance_release, instance_restart
from instances.tests.conftest import committed
from instances.tests.local_helpers import wait_running, wait_until
from instances.tests.test_local_sshd import _keypair, _ssh
from storage import services
from storage.models import Volume
from storage.tests.conftest import make_volume

pytestmark = pytest.mark.local


def _launch(user, *, name, volumes, ssh_keys):
    with committed():
        instance = instance_launch(
            LaunchRequest(
                user=user,
                region=Region.objects.get(slug="local"),
                gpu_model=GpuModel.objects.get(slug="h200"),
                gpu_count=1,
                image=Image.objects.get(slug="pytorch-2.5-cu124"),
                disk_gb=50,
                name=name,
                ssh_keys=ssh_keys,
                volumes=volumes,
            )
        )
    return wait_running(instance)


class Shell:
    """Run commands in an instance over its sshd, as its owner would."""

    def __init__(self, backend, instance, key: Path, tmp_path: Path) -> None:
        runtime = backend.runtime
        self.port = runtime.ports.get(instance.key)["ssh"]
        self.user = runtime.meta(instance.key)["login_user"]
        self.key = key
        host_key = (runtime.paths(instance.key).run / "ssh_host_ed25519_key.pub").read_text().split()
        self.known_hosts = tmp_path / f"known_hosts-{instance.key}"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
        wait_until(lambda: backend.poll(key=instance.key, state={}).state == "running", what="sshd")

    def __call__(self, command: str):
        return _ssh(self.key, self.port, self.known_hosts, self.user, command)


def test_a_file_written_by_the_trainer_is_read_by_the_server_which_cannot_write(this_host, rich_alice, tmp_path):
    backend = this_host(services=("ssh",))
    key, public = _keypair(tmp_path, "alice")
    laptop = ssh_key_add(user=rich_alice, name="laptop", public_key=public)
    volume = make_volume(rich_alice, region="local", size_gb=10, name="checkpoints")
    assert volume.status == Volume.Status.AVAILABLE
    assert Path(volume.backend_state["path"]) == backend.runtime.volume_path(volume.key)

    trainer = _launch(rich_alice, name="trainer", volumes=[(volume, "/mnt/train", "rw")], ssh_keys=[laptop])
    server = _launch(rich_alice, name="server", volumes=[(volume, "/models/mine", "ro")], ssh_keys=[laptop])
    train, serve = Shell(backend, trainer, key, tmp_path), Shell(backend, server, key, tmp_path)

    wrote = train(
        'head -c 300000 /dev/urandom > "$CONSOLE_VOLUME_MNT_TRAIN/model.bin" && sha256sum ~/mnt/train/model.bin'
    )
    assert wrote.returncode == 0, wrote.stderr
    digest = wrote.stdout.split()[0]

    read = serve('sha256sum "$CONSOLE_VOLUME_MODELS_MINE/model.bin"; echo "$CONSOLE_VOLUME_MODELS_MINE"')
    assert read.returncode == 0, read.stderr
    assert read.stdout.split()[0] == digest
    assert read.stdout.split()[-1] == str(backend.runtime.paths(server.key).home / "models/mine")

    refused = serve("echo tampered > ~/models/mine/model.bin")
    if not backend.runtime.mounts(server.key)[0]["enforced"]:
        pytest.skip("this process may not bind-mount, so read-only is not enforced here (see the supervisor)")
    assert refused.returncode != 0
    assert "Read-only file system" in refused.stderr
    assert serve("touch ~/models/mine/new").returncode != 0
    # The writer still writes; the reader sees it at once (one filesystem).
    assert train("echo v2 > ~/mnt/train/VERSION").returncode == 0
    assert serve("cat ~/models/mine/VERSION").stdout == "v2\n"

    assert services.volume_usage_refresh(volume=volume) >= 300000

    # Releasing the reader unmounts before deleting its disk: the volume's files are untouched.
    with committed():
        instance_release(instance=server)
    assert not backend.runtime.paths(server.key).base.exists()
    assert train("sha256sum ~/mnt/train/model.bin").stdout.split()[0] == digest


def test_a_detach_unmounts_at_the_restart_and_deleting_removes_the_files(this_host, rich_alice, tmp_path):
    backend = this_host(services=("ssh",))
    key, public = _keypair(tmp_path, "alice")
    laptop = ssh_key_add(user=rich_alice, name="laptop", public_key=public)
    volume = make_volume(rich_alice, region="local", size_gb=1, name="scratch")
    box = _launch(rich_alice, name="box", volumes=[(volume, "/data/scratch", "ro")], ssh_keys=[laptop])
    home = backend.runtime.paths(box.key).home
    assert (home / "data/scratch").is_dir()

    services.volume_detach(attachment=volume.attachments.get())
    with committed():
        instance_restart(instance=box)
    wait_running(box)
    assert not (home / "data/scratch").exists()
    assert [m["path"] for m in backend.runtime.mounts(box.key)] == sorted(backend.runtime.public_mounts)
    assert Shell(backend, box, key, tmp_path)("ls ~/data").stdout == ""

    with committed():
        services.volume_delete(volume=volume)
    volume.refresh_from_db()
    assert volume.status == Volume.Status.DELETED
    assert not backend.runtime.volume_path(volume.key).exists()
