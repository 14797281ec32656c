"""Save as image on this host, with real podman: a file changed in an instance is in an instance launched
from the saved image, owned by the image's own uid (not the first tenant's host uid), and nothing of the
console's is (its secrets, host keys, labels). And the podman 4.x bug the save works around is still
there: when this says otherwise, the uid shift in ``providers.local.runtime.image_save`` can go.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import uuid

import pytest

from instances.models import Image
from instances.services import image_delete, image_save, instance_release
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running
from providers.local.tests.test_local_containers import (  # noqa: F401 (fixtures)
    BOOT_S,
    MINIMAL,
    _exec,
    container_images,
    in_containers,
    registry,
)

pytestmark = [pytest.mark.local, pytest.mark.containers, pytest.mark.django_db(transaction=True)]

# A uid range no tenant of the console is given (``instances.tenancy`` counts up from far below it).
PROBE_BASE = 3_000_000_000


def test_podman_still_commits_host_uids_so_the_shift_is_still_needed(container_images, tmp_path):  # noqa: F811
    """Commit a container run in a uid range, as the console runs every instance, and read the uid of a
    file its root made. Podman 4.3 writes the host's uid (the range's base); a fixed podman writes 0, and
    this test fails to say that the shift (``layout_fix``'s uid rewrite) is no longer needed."""
    from providers.local.runtime.podman import Podman

    podman = Podman()
    name = f"console-uid-probe-{uuid.uuid4().hex[:8]}"
    committed_ref = f"localhost/console-save/{name}:probe"
    layout = tmp_path / "layout"
    try:
        podman.run(
            "run", "--name", name, "--uidmap", f"0:{PROBE_BASE}:65536", "--gidmap", f"0:{PROBE_BASE}:65536",
            "--entrypoint", "/bin/sh", MINIMAL, "-c", "echo probe > /opt/console-uid-probe", timeout=120,
        )  # fmt: skip
        podman.run("commit", "--format", "oci", "--quiet", name, committed_ref, timeout=300)
        subprocess.run(
            ["skopeo", "copy", "--quiet", f"containers-storage:{committed_ref}", f"dir:{layout}"],
            env=podman.env(), check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    finally:
        podman.remove(name)
        podman.run("rmi", "--force", committed_ref, check=False)
    manifest = json.loads((layout / "manifest.json").read_text())
    top = layout / manifest["layers"][-1]["digest"].split(":")[1]
    with tarfile.open(top) as tar:
        probe = tar.getmember("opt/console-uid-probe")
    if probe.uid == 0:
        pytest.fail(
            "podman now commits the container's own uids (upstream fixed 'wrong uids when userns and idmapping "
            "are used'): the uid shift in providers/local/runtime/image_save.py is no longer needed"
        )
    assert probe.uid == PROBE_BASE, f"an unexpected uid {probe.uid} for a file made by the container's root"


def _pinned_catalogue_image(runtime, address: str, slug: str = "pytorch-2.5-cu124") -> str:
    """Push the minimal image to ``address`` and pin catalogue image ``slug`` to it, as ``images_publish``
    does: launches of it then run ``repository@digest``. Returns the slug."""
    podman = runtime.podman
    podman.run("push", "--tls-verify=false", MINIMAL, f"{address}/console/minimal:v1", timeout=300)
    digest = json.loads(
        subprocess.run(
            ["skopeo", "inspect", "--tls-verify=false", f"docker://{address}/console/minimal:v1"],
            capture_output=True, text=True, check=True, env=podman.env(),
        ).stdout
    )["Digest"]  # fmt: skip
    Image.objects.filter(slug=slug).update(repository=f"{address}/console/minimal", digest=digest, tag="v1")
    return slug


@pytest.mark.parametrize("base", ["local", "pinned"])
def test_a_file_changed_in_an_instance_is_in_an_instance_launched_from_its_saved_image(
    in_containers,  # noqa: F811
    rich_alice,
    registry,  # noqa: F811
    settings,
    base,
):
    """``local``: the instance runs an image of this host's store (podman commit, the fix, skopeo's push);
    ``pinned``: a catalogue image pinned in the registry, as launches run them (the direct push: only
    the container's own layer is read and pushed beside the base's)."""
    settings.CONSOLE_REGISTRY, settings.CONSOLE_REGISTRY_TLS_VERIFY = registry, False
    backend = in_containers(services=("lab",))
    catalogue_image = "pytorch-2.5-cu124"
    if base == "pinned":
        _pinned_catalogue_image(backend.runtime, registry)
    with committed():
        first = launch(rich_alice, gpu="h200", region="local", disk_gb=20, image=catalogue_image)
    wait_running(first, timeout=BOOT_S)
    runtime = backend.runtime
    container = runtime.container_name(first.key)
    lab_token = runtime.meta(first.key)["secrets"]["lab"]
    changed = runtime.podman.run(
        "exec", container, "sh", "-c",
        "echo saved-change > /opt/console-saved && chown 1000:1000 /opt/console-saved "
        "&& mkdir -p /etc/ssh && echo not-a-key > /etc/ssh/ssh_host_ed25519_key "
        "&& rm /etc/debian_version && rm -rf /usr/share/doc && mkdir /usr/share/doc && touch /usr/share/doc/new",
        check=False,
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr

    with committed():
        saved = image_save(instance=first, actor=rich_alice, name="my-env", tag="v1")
    saved.refresh_from_db()
    assert saved.status == Image.Status.READY, saved.status_reason
    assert saved.size_bytes > 0 and saved.digest.startswith("sha256:")
    assert saved.repository == f"{registry}/users/u{rich_alice.pk}/my-env"

    # The image alone, no console mounts: nothing of the console's, and the change owned by uid 1000.
    ref = saved.pinned_ref
    runtime.podman.run("pull", "--tls-verify=false", ref, timeout=300)

    def look(image: str, command: str) -> str:
        return runtime.podman.run("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", command, timeout=120).stdout

    tmpfs = "find /run /tmp -mindepth 1 ! -name .containerenv | sort"
    assert look(ref, tmpfs) == look(MINIMAL, tmpfs)  # /run and /tmp as the image it booted had them
    assert look(ref, "stat -c %u /opt/console-saved").strip() == "1000"
    assert look(ref, "ls /etc/ssh | grep -c ssh_host_ || true").strip() == "0"  # no host key
    assert look(ref, "test -e /etc/debian_version || echo deleted").strip() == "deleted"  # a whiteout
    assert look(ref, "ls /usr/share/doc").split() == ["new"]  # a folder made again: opaque
    assert look(ref, f"grep -rl {lab_token} /opt /etc /root /usr/local /var 2>/dev/null | head -1").strip() == ""
    top = json.loads(
        subprocess.run(
            ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{ref}"],
            capture_output=True, text=True, check=True, env=runtime.podman.env(),
        ).stdout
    )["layers"][-1]  # fmt: skip
    # The direct push uploads the layer as it was written; skopeo's push compresses it.
    assert top["mediaType"].endswith("tar" if base == "pinned" else "tar+gzip")
    labels = (runtime.podman.inspect("image", ref) or {}).get("Config", {}).get("Labels") or {}
    assert "org.gpu-console.instance" not in labels

    with committed():
        second = launch(rich_alice, gpu="h200", region="local", disk_gb=20, image=saved.slug)
    wait_running(second, timeout=BOOT_S)
    assert second.image_ref == ref and runtime.meta(second.key)["image"] == ref
    seen = _exec(backend, second.key, "cat /opt/console-saved && echo more >> /opt/console-saved")
    assert seen.returncode == 0 and seen.stdout.strip() == "saved-change", seen.stderr  # read and written as uid 1000

    # Deleted once nothing uses it: its manifest leaves the registry (its blobs at the registry's clean-up).
    with committed():
        instance_release(instance=second)
    with committed():
        image_delete(image=Image.objects.get(pk=saved.pk))
    gone = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{ref}"],
        capture_output=True, text=True, env=runtime.podman.env(),
    )  # fmt: skip
    assert gone.returncode != 0 and "manifest unknown" in gone.stderr.lower(), gone.stderr
