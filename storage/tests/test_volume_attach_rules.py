"""Attaching volumes: one writer (or shared writers where the backend allows), readers beside it, in the
volume's region, at a mount path that is valid and free on the instance; deleting waits for detaching;
mounts reach the machine when it boots."""

from __future__ import annotations

import pytest

from instances.models import GpuModel, Image, Instance, Node, Region
from instances.services import LaunchRequest, instance_launch, instance_release, instance_restart, instance_stop
from instances.tests.conftest import backends, committed, running
from providers.simulated.models import SimulatedMachine
from storage import services
from storage.models import Volume, VolumeAttachment
from storage.tests.conftest import make_volume

RW, RO, SHARED = "rw", "ro", "shared-rw"


def _attach(volume, instance, path="/mnt/data", mode=RW):
    return services.volume_attach(user=volume.owner, volume=volume, instance=instance, mount_path=path, mode=mode)


def _mounted(instance) -> list[dict]:
    return SimulatedMachine.objects.get(key=instance.key).spec.get("volumes", [])


@pytest.fixture
def volume(rich_alice):
    return make_volume(rich_alice, name="weights")


def test_read_write_to_one_and_read_only_to_many(rich_alice, volume):
    a, b, c = (running(rich_alice) for _ in range(3))
    _attach(volume, a, mode=RW)
    with pytest.raises(services.AttachmentConflict, match="attached for writing to"):
        _attach(volume, b, mode=RW)
    _attach(volume, b, "/models/w", mode=RO)
    _attach(volume, c, "/models/w", mode=RO)
    assert sorted(volume.attachments.values_list("mode", flat=True)) == [RO, RO, RW]


def test_shared_read_write_is_refused_where_the_backend_cannot_share_writes(rich_alice, volume):
    a = running(rich_alice)
    with pytest.raises(services.VolumeInvalid) as refused:
        _attach(volume, a, mode=SHARED)
    assert refused.value.field == "mode"
    assert not VolumeAttachment.objects.exists()


def test_shared_read_write_to_many_where_the_backend_shares_writes_but_never_beside_plain_read_write(
    rich_alice, settings
):
    settings.PROVISIONING_BACKENDS = backends(SHARED_WRITE=True)
    volume = make_volume(rich_alice)
    a, b, c = (running(rich_alice) for _ in range(3))
    _attach(volume, a, mode=SHARED)
    _attach(volume, b, mode=SHARED)
    with pytest.raises(services.AttachmentConflict):
        _attach(volume, c, mode=RW)
    other = make_volume(rich_alice)
    _attach(other, c, "/mnt/other", mode=RW)
    with pytest.raises(services.AttachmentConflict, match="not shared"):
        _attach(other, a, "/mnt/other", mode=SHARED)


def test_a_volume_is_attached_only_in_its_own_region(rich_alice, volume):
    east = running(rich_alice, region="cn-east-1")
    with pytest.raises(services.VolumeInvalid, match="in its own region") as refused:
        _attach(volume, east)
    assert refused.value.field == "instance"


@pytest.mark.parametrize(
    "path",
    [
        "mnt/data",
        "",
        "/",
        "/etc/passwd",
        "/home/user",
        "/mnt/../etc",
        "/mnt/./data",
        "/mnt//data",
        "/mnt/da ta",
        "/mntx",
        "/mnt/-flag",
        "/mnt/" + "x" * 130,
    ],
)
def test_bad_mount_paths_are_refused(rich_alice, volume, path):
    instance = running(rich_alice)
    with pytest.raises(services.VolumeInvalid) as refused:
        _attach(volume, instance, path)
    assert refused.value.field == "mount_path"


@pytest.mark.parametrize(
    "given, stored", [("/mnt/data/", "/mnt/data"), (" /models ", "/models"), ("/data/a.b_c-1", "/data/a.b_c-1")]
)
def test_good_mount_paths_are_stored_in_one_spelling(rich_alice, volume, given, stored):
    assert _attach(volume, running(rich_alice), given).mount_path == stored


def test_mount_paths_on_one_instance_must_not_collide(rich_alice, volume):
    instance = running(rich_alice)
    other, third = make_volume(rich_alice), make_volume(rich_alice)
    _attach(volume, instance, "/mnt/a")
    with pytest.raises(services.VolumeInvalid, match="collides"):
        _attach(other, instance, "/mnt/a/b")
    with pytest.raises(services.VolumeInvalid, match="collides"):
        _attach(other, instance, "/mnt")
    _attach(other, instance, "/mnt/ab")
    _attach(third, running(rich_alice), "/mnt/a")  # the same path on another instance is fine


def test_attaching_again_to_the_same_instance_changes_path_and_mode(rich_alice, volume):
    instance = running(rich_alice)
    _attach(volume, instance, "/mnt/a", RW)
    _attach(volume, instance, "/models/a", RO)
    assert list(volume.attachments.values_list("mount_path", "mode")) == [("/models/a", RO)]


def test_someone_elses_volume_or_instance_is_refused(rich_alice, charlie, volume):
    from instances.tests.conftest import fund

    fund(charlie, 100_000)
    theirs = running(charlie)
    with pytest.raises(services.VolumeInvalid):
        services.volume_attach(user=charlie, volume=volume, instance=theirs, mount_path="/mnt/x", mode=RW)
    with pytest.raises(services.VolumeInvalid):
        services.volume_attach(user=rich_alice, volume=volume, instance=theirs, mount_path="/mnt/x", mode=RW)


def test_a_released_instance_no_longer_holds_the_writer_slot(rich_alice, volume):
    a, b = running(rich_alice), running(rich_alice)
    _attach(volume, a)
    with committed():
        instance_release(instance=a)
    _attach(volume, b)


def test_delete_is_refused_while_attached_and_allowed_once_detached(rich_alice, volume):
    instance = running(rich_alice)
    attachment = _attach(volume, instance)
    with pytest.raises(services.VolumeNotAllowed, match="attached to"):
        services.volume_delete(volume=volume)
    # Detached while running: still mounted until it stops or restarts, so still refused.
    assert services.volume_detach(attachment=attachment) is not None
    with pytest.raises(services.VolumeNotAllowed):
        services.volume_delete(volume=volume)
    with committed():
        instance_stop(instance=instance)
    with committed():
        services.volume_delete(volume=volume)
    volume.refresh_from_db()
    assert volume.status == Volume.Status.DELETED
    assert not VolumeAttachment.objects.exists()


def test_detaching_from_a_stopped_instance_is_immediate(rich_alice, volume):
    instance = running(rich_alice)
    attachment = _attach(volume, instance)
    with committed():
        instance_stop(instance=instance)
    attachment.instance.refresh_from_db()
    assert services.volume_detach(attachment=attachment) is None
    assert not VolumeAttachment.objects.exists()


def test_attached_at_launch_the_machine_boots_with_it_mounted(rich_alice, volume):
    reader = make_volume(rich_alice, name="datasets")
    with committed():
        instance = instance_launch(
            LaunchRequest(
                user=rich_alice,
                region=Region.objects.get(slug="cn-north-1"),
                gpu_model=GpuModel.objects.get(slug="a800-80g"),
                gpu_count=1,
                image=Image.objects.get(slug="pytorch-2.5-cu124"),
                disk_gb=50,
                volumes=[(volume, "/mnt/train", RW), (reader, "/data/sets", RO)],
            )
        )
    assert _mounted(instance) == [
        {"key": volume.key, "path": "/mnt/train", "read_only": False},
        {"key": reader.key, "path": "/data/sets", "read_only": True},
    ]


def test_a_launch_with_a_refused_volume_creates_nothing(rich_alice, volume):
    holder = running(rich_alice)
    _attach(volume, holder)
    free_before = sum(Node.objects.values_list("free_cards", flat=True))
    with pytest.raises(services.AttachmentConflict), committed():
        instance_launch(
            LaunchRequest(
                user=rich_alice,
                region=Region.objects.get(slug="cn-north-1"),
                gpu_model=GpuModel.objects.get(slug="a800-80g"),
                gpu_count=1,
                image=Image.objects.get(slug="pytorch-2.5-cu124"),
                disk_gb=50,
                volumes=[(volume, "/mnt/train", RW)],
            )
        )
    assert Instance.objects.count() == 1
    assert sum(Node.objects.values_list("free_cards", flat=True)) == free_before


def test_attach_and_detach_take_effect_at_the_next_restart(rich_alice, volume):
    instance = running(rich_alice)
    attachment = _attach(volume, instance, "/mnt/data")
    assert _mounted(instance) == []
    with committed():
        instance_restart(instance=instance)
    assert [m["path"] for m in _mounted(instance)] == ["/mnt/data"]
    services.volume_detach(attachment=attachment)
    instance.refresh_from_db()
    with committed():
        instance_restart(instance=instance)
    assert _mounted(instance) == []
    assert not VolumeAttachment.objects.exists()
