"""The Dockerfile round trip on this host, with real podman and a registry: an instance gets a Python package
installed from a wheel file (no index reachable), a file written and one deleted; its saved image's recipe
says so (the wheel's files copied, the file copied, the deletion a ``rm``); that recipe, edited, is built by
the console's builder (podman build, no network, the owner's uid range) and the built image holds every
change, owned as in the instance, plus the edit.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

import pytest

from instances.models import Image
from instances.services import image_build, image_save
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running
from providers.local.tests.test_image_save_podman import _pinned_catalogue_image
from providers.local.tests.test_local_containers import (  # noqa: F401 (fixtures)
    BOOT_S,
    MINIMAL,
    container_images,
    in_containers,
    registry,
)

pytestmark = [pytest.mark.local, pytest.mark.containers, pytest.mark.django_db(transaction=True)]


def _wheel() -> bytes:
    """A pure-Python wheel made here (nothing is downloaded): ``recipewheel`` 0.1, ``VALUE = 42``."""
    files = {
        "recipewheel/__init__.py": b"VALUE = 42\n",
        "recipewheel-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: recipewheel\nVersion: 0.1\n",
        "recipewheel-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("recipewheel-0.1.dist-info/RECORD,,")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("recipewheel-0.1.dist-info/RECORD", "\n".join(record) + "\n")
    return out.getvalue()


def test_a_saved_images_recipe_edited_and_built_holds_its_changes(
    in_containers,  # noqa: F811
    rich_alice,
    registry,  # noqa: F811
    settings,
    tmp_path,
):
    settings.CONSOLE_REGISTRY, settings.CONSOLE_REGISTRY_TLS_VERIFY = registry, False
    settings.INSTANCES_IMAGE_BUILD_BACKEND = "local"
    settings.INSTANCES_IMAGE_BUILD_TIMEOUT_S = 300
    backend = in_containers(services=("lab",))
    runtime = backend.runtime
    catalogue_image = _pinned_catalogue_image(runtime, registry)
    with committed():
        first = launch(rich_alice, gpu="h200", region="local", disk_gb=20, image=catalogue_image)
    wait_running(first, timeout=BOOT_S)
    container = runtime.container_name(first.key)
    wheel = tmp_path / "recipewheel-0.1-py3-none-any.whl"
    wheel.write_bytes(_wheel())
    runtime.podman.run("cp", str(wheel), f"{container}:/opt/{wheel.name}", timeout=60)
    changed = runtime.podman.run(
        "exec", container, "sh", "-c",
        f"/opt/venv/bin/pip install --no-index --no-deps -q /opt/{wheel.name} && rm /opt/{wheel.name} "
        "&& echo recipe-change > /opt/recipe-change && chown 1000:1000 /opt/recipe-change "
        "&& ln -s /opt/recipe-change /usr/local/bin/recipe-link && rm /etc/debian_version "
        # A Debian package made and installed here (no mirror needed): the recipe reads it off dpkg's status.
        "&& mkdir -p /var/tmp/pkg/DEBIAN /var/tmp/pkg/usr/share/recipe-pkg && echo hi > /var/tmp/pkg/usr/share/recipe-pkg/hi "
        "&& printf 'Package: recipe-pkg\\nVersion: 1.2-3\\nArchitecture: all\\nMaintainer: t <t@t>\\nDescription: t\\n' "
        "> /var/tmp/pkg/DEBIAN/control && dpkg-deb -b /var/tmp/pkg /var/tmp/recipe-pkg.deb >/dev/null "
        "&& dpkg -i /var/tmp/recipe-pkg.deb >/dev/null && rm -rf /var/tmp/pkg /var/tmp/recipe-pkg.deb",
        check=False, timeout=120,
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr

    with committed():
        saved = image_save(instance=first, actor=rich_alice, name="my-env", tag="v1")
    saved.refresh_from_db()
    assert saved.status == Image.Status.READY, saved.status_reason
    recipe = saved.recipe
    base = Image.objects.get(slug=catalogue_image)
    assert f"FROM {base.pinned_ref}" in recipe
    assert f'COPY --from={saved.pinned_ref} --chown=1000:1000 ["/opt/recipe-change", "/opt/"]' in recipe
    assert "/opt/venv/lib/python3.11/site-packages/recipewheel/__init__.py" in recipe  # copied: from a file
    assert "installed from a file or URL" in recipe and "pip install" not in recipe
    steps = recipe.replace("\\\n", " ").splitlines()
    assert any(step.startswith("RUN rm -rf --") and "/etc/debian_version" in step for step in steps)
    assert any("ln -sfn /opt/recipe-change /usr/local/bin/recipe-link" in step for step in steps)
    # The package by version, read against the base's status (only it: the base's packages are not listed),
    # and its files not copied.
    apt = [" ".join(step.split()) for step in steps if "apt-get install" in step]
    assert len(apt) == 1 and apt[0].endswith("--no-install-recommends recipe-pkg=1.2-3 && rm -rf /var/lib/apt/lists/*")
    assert "/usr/share/recipe-pkg/hi" not in recipe
    assert "/etc/ssh/ssh_host_" not in recipe and "/run/" not in recipe.split("FROM", 1)[1]

    # No mirror has recipe-pkg (and the build has no network): the edit drops that step, adds one of its own.
    apt_step = recipe[recipe.index("RUN apt-get update") :].split("\n\n", 1)[0]
    edited = recipe.replace(apt_step, "") + "RUN echo edited > /opt/edited && id -u > /opt/built-as\n"
    with committed():
        built = image_build(
            principal=rich_alice, membership=None, actor=rich_alice, recipe=edited, name="my-env", tag="v2"
        )
    built.refresh_from_db()
    assert built.status == Image.Status.READY, built.status_reason + "\n" + built.build_log
    assert built.digest.startswith("sha256:") and built.size_bytes > 0
    assert "COMMIT" in built.build_log or "STEP" in built.build_log

    ref = built.pinned_ref
    runtime.podman.run("pull", "--tls-verify=false", ref, timeout=300)

    def look(command: str) -> str:
        return runtime.podman.run("run", "--rm", "--entrypoint", "/bin/sh", ref, "-c", command, timeout=120).stdout

    assert look("cat /opt/recipe-change; stat -c %u /opt/recipe-change").split() == ["recipe-change", "1000"]
    assert look("/opt/venv/bin/python -c 'import recipewheel; print(recipewheel.VALUE)'").strip() == "42"
    assert look("test -e /etc/debian_version || echo deleted").strip() == "deleted"
    assert look("readlink /usr/local/bin/recipe-link").strip() == "/opt/recipe-change"
    assert look("cat /opt/edited; stat -c %u /opt/edited; cat /opt/built-as").split() == ["edited", "0", "0"]
    # No host uid of the owner's range in the image: every file is the image's own (0 … 65535).
    assert look("find / -xdev -uid +65535 2>/dev/null | head -3").strip() == ""


@pytest.mark.parametrize("network", ["none", "tenant"])
def test_a_builds_steps_get_the_network_the_settings_give(
    in_containers,  # noqa: F811
    rich_alice,
    registry,  # noqa: F811
    settings,
    network,
):
    """``none``: a step sees no interface but loopback. ``tenant``: it joins a holder on the owner's own
    instance network (behind its firewall), so it has one more; the holder is gone after the build."""
    settings.CONSOLE_REGISTRY, settings.CONSOLE_REGISTRY_TLS_VERIFY = registry, False
    settings.INSTANCES_IMAGE_BUILD_BACKEND = "local"
    settings.INSTANCES_IMAGE_BUILD_NETWORK = network
    backend = in_containers(services=("lab",))
    base = Image.objects.get(slug=_pinned_catalogue_image(backend.runtime, registry))
    recipe = f"FROM {base.pinned_ref}\nRUN tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort > /opt/ifaces\n"
    with committed():
        built = image_build(principal=rich_alice, membership=None, actor=rich_alice, recipe=recipe, name="net")
    built.refresh_from_db()
    assert built.status == Image.Status.READY, built.build_log
    podman = backend.runtime.podman
    podman.run("pull", "--tls-verify=false", built.pinned_ref, timeout=300)
    seen = podman.run("run", "--rm", "--entrypoint", "cat", built.pinned_ref, "/opt/ifaces", timeout=120).stdout.split()
    if network == "none":
        assert seen == ["lo"]
    else:
        assert "lo" in seen and len(seen) == 2, seen
    holders = podman.run("ps", "-a", "--filter", "name=console-build-", "--format", "{{.Names}}").stdout.split()
    assert holders == []
