"""On the test cluster, with the podman engine, a job runs its instance's image with the tenant's rootless
podman under the image contract: two tenants' instances run the images they chose and cannot reach each
other's files, processes, ports or secrets; a process over the job's memory is killed by Slurm's cgroup
and the instance says so; cancelling the job leaves no process and no container behind; an image the
node cannot pull fails the launch with that reason; a launch through the console runs the digest it
pinned and the kill is on the instance's timeline.

The images are the project's own (``make images``: ``minimal`` and its variant ``minimal-alt``), pushed to
a registry of the test's on 127.0.0.1 and launched by digest, as the console pins them."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from instances.models import Image, InstanceEvent
from instances.services import instance_sync
from instances.tests.conftest import committed, launch
from instances.tests.oci_images import installed as registry_installed
from instances.tests.oci_images import registry_running
from providers import InstanceSpec, Observed
from providers.base import BOOT_FAILED
from providers.local.runtime.podman import Podman
from providers.local.tests.local_helpers import wait_running, wait_until
from providers.slurm.pod import runtime_dir_default
from providers.slurm.tests.slurm_helpers import tenant

pytestmark = [pytest.mark.slurm, pytest.mark.containers, pytest.mark.django_db(transaction=True)]

MINIMAL = "localhost/console/minimal:latest"
ALT = "localhost/console/minimal-alt:latest"
# wall-clock: a tenant's first pull of a 550 MB image (about 25 s) and JupyterLab's first start on a
# busy 2-core host.
BOOT_S = 240


@pytest.fixture(scope="module")
def pinned_images(tmp_path_factory):
    """``{"minimal": ref, "alt": ref}``: the two images pushed to a registry on 127.0.0.1, by digest."""
    podman = Podman()
    if podman.missing() or not registry_installed():
        pytest.skip(podman.missing() or "docker-registry or skopeo is not installed")
    for image in (MINIMAL, ALT):
        if not podman.image_exists(image):
            pytest.skip(f"{image} is not built (make images)")
    with registry_running(tmp_path_factory.mktemp("registry")) as registry:
        refs = {}
        for name, image in (("minimal", MINIMAL), ("alt", ALT)):
            target = f"{registry.address}/console/{name}:test"
            podman.run("push", "--tls-verify=false", image, target, timeout=300)
            inspect = subprocess.run(
                ["skopeo", "inspect", "--tls-verify=false", f"docker://{target}"],
                capture_output=True, text=True, check=True, env=podman.env(),
            )  # fmt: skip
            refs[name] = f"{registry.address}/console/{name}@{json.loads(inspect.stdout)['Digest']}"
        yield refs


def _spec(owner, image_ref: str) -> InstanceSpec:
    return InstanceSpec(
        node="", gpu_model="h200", gpu_count=1, image="minimal", image_ref=image_ref, disk_gb=20, tenant=owner
    )


def _running(backend, key: str, spec: InstanceSpec) -> dict:
    seen = {"state": backend.create(key=key, spec=spec)}

    def running() -> bool:
        observation = backend.poll(key=key, state=seen["state"])
        assert observation.stage != BOOT_FAILED, observation.detail
        seen["state"] = observation.backend_state or seen["state"]
        return observation.state == Observed.RUNNING

    try:
        wait_until(running, timeout=BOOT_S, interval=0.5, what=f"{key} to run")
    except AssertionError as exc:  # what the job said, for whoever reads the failure
        run = backend._dir(key) / "run"
        said = {p.name: p.read_text(errors="replace")[-2000:] for p in run.glob("*.log")}
        said |= {p.name: p.read_text()[-1000:] for p in run.glob("slurm-report-*.json")}
        raise AssertionError(f"{exc}: {said}") from None
    return seen["state"]


def _inside(backend, key: str, state: dict, command: str, *, timeout: float = 60) -> str:
    """What ``command`` prints, run in the instance as its owner (the job runs the checkpoint command
    in the container, as uid 1000); the log is the job's, read on the shared filesystem."""
    log = backend._dir(key) / "run" / "checkpoint.log"
    before = log.read_text() if log.exists() else ""
    stamp = time.monotonic_ns()
    marker = f"--- done {stamp}"  # what the echo prints; the log's header line has the command as written
    assert backend.checkpoint(key=key, state=state, command=f"{command}; echo '--- do''ne {stamp}'", grace_s=5)
    wait_until(lambda: log.exists() and marker in log.read_text()[len(before) :], timeout=timeout, what=command)
    return log.read_text()[len(before) :].split("\n", 1)[1]  # what it printed, not the header naming it


def _lab_answers(state: dict, key: str, token: str) -> int:
    import httpx

    port = state["ports"]["lab"]
    url = f"http://127.0.0.1:{port}/i/{key}/lab/api/status"
    return httpx.get(url, headers={"Authorization": f"token {token}"}, timeout=5).status_code


def _processes_of(owner) -> list[psutil.Process]:
    """The tenant's processes on this host: its own uid, and its subordinate range (the container's
    root and other uids but 1000)."""
    low, high = owner.uid_base, owner.uid_base + owner.uid_count
    return [
        p
        for p in psutil.process_iter(["uids", "name"])
        if p.info["uids"] and (p.info["uids"].real == owner.uid or low <= p.info["uids"].real < high)
    ]


def test_two_tenants_run_their_own_images_and_cannot_reach_each_other(on_slurm, slurm_cluster, pinned_images):
    backend = on_slurm(services=("lab",), ENGINE="podman")
    alice, bob = tenant(9301), tenant(9302)
    a_state = _running(backend, "pod-a", _spec(alice, pinned_images["minimal"]))
    b_state = _running(backend, "pod-b", _spec(bob, pinned_images["alt"]))
    assert _lab_answers(a_state, "pod-a", backend.server_secrets("pod-a")["lab"]) == 200
    assert _lab_answers(b_state, "pod-b", backend.server_secrets("pod-b")["lab"]) == 200

    # The image applies: each instance shows its own /etc/os-release and files.
    a_os = _inside(backend, "pod-a", a_state, "grep PRETTY_NAME /etc/os-release; cat /etc/console-image || true")
    b_os = _inside(backend, "pod-b", b_state, "grep PRETTY_NAME /etc/os-release; cat /etc/console-image || true")
    assert "Debian GNU/Linux 12 (bookworm)" in a_os and "minimal-alt" not in a_os
    assert "Console minimal-alt (Debian 12 bookworm)" in b_os and "\nminimal-alt\n" in b_os

    # From inside A: its own user namespace (not the host's), uid 1000, its home is its disk.
    b_dir = backend._dir("pod-b")
    b_port = b_state["ports"]["lab"]
    b_token = backend.server_secrets("pod-b")["lab"]
    seen = _inside(
        backend,
        "pod-a",
        a_state,
        "cat /proc/self/uid_map; id -u; "
        f"ls {b_dir} {b_dir}/home {b_dir}/secrets 2>&1 | head -3; "
        "ls -d /proc/[0-9]* | wc -l | sed 's/^/procs: /'; "
        # B's JupyterLab serves /i/pod-b/lab/ (the pattern is split so that this command is no match)
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c 'pod[-]b/lab' | sed 's/^/b-cmdlines: /'; "
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c 'pod[-]a/lab' | sed 's/^/a-cmdlines: /'; "
        f'for h in 127.0.0.1 10.0.2.2; do timeout 3 bash -c "</dev/tcp/$h/{b_port}" 2>/dev/null '
        "&& echo open-$h || echo closed-$h; done; "
        f"grep -rl {b_token} /run/console-secrets /home/user 2>/dev/null | sed 's/^/leak: /'; true",
    )
    uid_map = [line.split() for line in seen.splitlines() if len(line.split()) == 3 and line.split()[0].isdigit()]
    assert uid_map and ["0", "0", "4294967295"] not in uid_map  # not the host's user namespace
    # Its uid 1000 is the uid that owns the namespace (the tenant's own, rootless podman's uid 0); the
    # container's root and the rest map to the tenant's subordinate range.
    assert ["1000", "0", "1"] in uid_map and ["0", "1", "1000"] in uid_map
    assert "\n1000\n" in seen
    assert "No such file or directory" in seen  # B's instance folder does not exist in A's view
    assert "a-cmdlines: 0" not in seen and "b-cmdlines: 0" in seen  # its own JupyterLab, none of B's processes
    assert int(seen.split("procs: ")[1].split()[0]) < 30  # its own PID namespace, not the host's
    assert "closed-127.0.0.1" in seen and "closed-10.0.2.2" in seen  # B's published port is out of reach
    assert "leak:" not in seen  # B's secret is nowhere A can read

    # And from the host: B's folder is B's alone (the kernel's word, not the container's).
    assert b_dir.stat().st_uid == bob.uid and (b_dir.stat().st_mode & 0o077) == 0


def test_memory_over_the_limit_is_killed_and_reported_and_cancel_leaves_nothing(on_slurm, slurm_cluster, pinned_images):
    backend = on_slurm(services=("lab",), ENGINE="podman", MAX_CPUS=2, MAX_MEMORY_GB=1)
    owner = tenant(9301)  # the image is in its store from the test above, or pulled now
    state = _running(backend, "pod-oom", _spec(owner, pinned_images["minimal"]))
    job = slurm_cluster.job(state["job_id"])
    assert "mem=1G" in job["tres_alloc_str"]

    log = backend._dir("pod-oom") / "run" / "checkpoint.log"
    hog = "python3 -c 'x = bytearray(1536 << 20); print(len(x))'"
    backend.checkpoint(key="pod-oom", state=state, command=hog, grace_s=5)

    def reported() -> str:
        observation = backend.poll(key="pod-oom", state=state)
        return observation.detail if "Out of memory" in observation.detail else ""

    detail = wait_until(reported, timeout=60, interval=0.5, what="the instance to report the kill")
    assert "memory limit (1024 MiB)" in detail
    wait_until(lambda: log.exists() and "--- checkpoint" in log.read_text(), timeout=10, what="the log")
    assert str(1536 << 20) not in log.read_text()  # killed, never given the memory

    # A cancel (the stop) leaves no process of the tenant, in or out of the container, and no container.
    container_processes = [p for p in _processes_of(owner) if p.info["uids"].real != owner.uid]
    assert container_processes  # the container's root (tini, JupyterLab's parent) is in the tenant's range
    backend.stop(key="pod-oom", state=state)
    wait_until(lambda: not _processes_of(owner), timeout=20, what="every process of the instance to end")
    assert slurm_cluster.active(f"{backend.prefix}pod-oom") == []
    # Nor podman's own processes (conmon, slirp4netns, rootlessport, the pause process): they were the
    # job's, in its cgroup. (Asking podman itself here would start a pause process of the tenant's.)
    assert not [p for p in psutil.process_iter(["uids", "name"]) if p.info["uids"].real == owner.uid]


def test_an_image_the_node_cannot_pull_fails_the_launch_with_that_reason(on_slurm, slurm_cluster, pinned_images):
    backend = on_slurm(services=("lab",), ENGINE="podman")
    registry = pinned_images["minimal"].split("/")[0]
    missing = f"{registry}/console/nothing@sha256:{'0' * 64}"
    state = backend.create(key="pod-nope", spec=_spec(tenant(9303), missing))

    def failed() -> str:
        observation = backend.poll(key="pod-nope", state=state)
        assert observation.state != Observed.RUNNING
        return observation.detail if observation.stage == BOOT_FAILED else ""

    detail = wait_until(failed, timeout=120, interval=0.5, what="the launch to fail")
    assert "could not be pulled" in detail and "console/nothing" in detail
    # Never the servers as host processes instead: nothing of the tenant runs.
    wait_until(lambda: not _processes_of(tenant(9303)), timeout=20, what="the job to end")


def test_the_tenants_podman_settings_are_provisioned_idempotently(on_slurm, slurm_cluster):
    backend = on_slurm(services=("lab",), ENGINE="podman")
    owner = tenant(9304)
    backend.tenants.ensure(owner)
    home = backend.tenants.home(owner)
    storage = home / ".config/containers/storage.conf"
    assert f'graphroot = "{home}/.local/share/containers/storage"' in storage.read_text()
    assert storage.stat().st_uid == owner.uid and storage.parent.stat().st_uid == owner.uid
    assert 'runtime = "runc"' in (home / ".config/containers/containers.conf").read_text()
    runtime = Path(runtime_dir_default(owner.uid))
    assert runtime.stat().st_uid == owner.uid and (runtime.stat().st_mode & 0o777) == 0o700
    # Only the console's range, once: useradd's default would overlap another tenant's.
    ranges = [line for line in Path("/etc/subuid").read_text().splitlines() if line.startswith(f"{owner.name}:")]
    assert ranges == [f"{owner.name}:{owner.uid_base}:{owner.uid_count}"]
    backend.tenants._done.clear()
    backend.tenants.ensure(owner)  # again: nothing changes
    ranges_again = [line for line in Path("/etc/subuid").read_text().splitlines() if line.startswith(f"{owner.name}:")]
    assert ranges_again == ranges
    assert shutil.which("newuidmap")


def test_a_launch_through_the_console_runs_the_digest_it_pinned_and_reports_a_kill(
    on_slurm, slurm_cluster, pinned_images, rich_alice
):
    backend = on_slurm(services=("lab",), ENGINE="podman", MAX_CPUS=2, MAX_MEMORY_GB=1)
    repository, digest = pinned_images["alt"].split("@")
    Image.objects.filter(slug="pytorch-2.5-cu124").update(repository=repository, digest=digest)
    with committed():
        instance = launch(rich_alice, gpu="h200", count=1, region="slurm-local", image="pytorch-2.5-cu124")
    wait_running(instance, timeout=BOOT_S)
    assert instance.image_ref == pinned_images["alt"]
    assert "Console minimal-alt" in _inside(backend, instance.key, instance.backend_state, "cat /etc/os-release")

    backend.checkpoint(
        key=instance.key,
        state=instance.backend_state,
        command="python3 -c 'x = bytearray(1536 << 20)'",
        grace_s=5,
    )

    def reported() -> bool:
        instance_sync(instance_id=instance.pk)
        return InstanceEvent.objects.filter(instance=instance, reason__contains="Out of memory").exists()

    wait_until(reported, timeout=60, interval=0.3, what="the instance to report the kill on its timeline")


def _host_key(state: dict) -> str:
    """The ed25519 key the instance's sshd shows, as the SSH gateway sees it on first use."""
    port = state["ports"]["ssh"]
    scan = subprocess.run(
        ["ssh-keyscan", "-T", "5", "-t", "ed25519", "-p", str(port), "127.0.0.1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    keys = [line.split(None, 1)[1] for line in scan.stdout.splitlines() if line and not line.startswith("#")]
    assert keys, scan.stderr
    return keys[0]


def test_the_sshd_keeps_its_host_key_across_a_stop_and_start_and_the_user_cannot_read_it(
    on_slurm, slurm_cluster, pinned_images
):
    if not shutil.which("ssh-keyscan"):
        pytest.skip("ssh-keyscan is not installed")
    backend = on_slurm(services=("lab", "ssh"), ENGINE="podman")
    owner = tenant(9301)
    state = _running(backend, "pod-ssh", _spec(owner, pinned_images["minimal"]))
    first = wait_until(lambda: _host_key(state), timeout=30, interval=0.5, what="sshd to answer")
    seen = _inside(backend, "pod-ssh", state, "id -u; cat /run/console-hostkeys/ssh_host_ed25519_key 2>&1 | head -1")
    assert "\n1000\n" in f"\n{seen}" and "Permission denied" in seen and "PRIVATE KEY" not in seen

    stopped = backend.stop(key="pod-ssh", state=state)
    wait_until(lambda: slurm_cluster.active(f"{backend.prefix}pod-ssh") == [], timeout=30, what="the job to end")
    seen_state = {"state": backend.start(key="pod-ssh", state=stopped, node="")}

    def running() -> bool:
        observation = backend.poll(key="pod-ssh", state=seen_state["state"])
        assert observation.stage != BOOT_FAILED, observation.detail
        seen_state["state"] = observation.backend_state or seen_state["state"]
        return observation.state == Observed.RUNNING

    wait_until(running, timeout=BOOT_S, interval=0.5, what="pod-ssh to run again")
    assert wait_until(lambda: _host_key(seen_state["state"]), timeout=30, interval=0.5, what="sshd") == first


def test_a_wandb_run_started_in_the_container_is_read_back_from_the_shared_disk(on_slurm, slurm_cluster, pinned_images):
    from providers.local.tests.test_local_container_secrets_live import FAKE_WANDB, RUN_URL

    backend = on_slurm(services=("lab",), ENGINE="podman")
    state = _running(backend, "pod-wandb", _spec(tenant(9301), pinned_images["minimal"]))
    assert backend.experiment_runs(key="pod-wandb", state=state) == []
    script = FAKE_WANDB.replace("'", "'\\''")
    said = _inside(
        backend,
        "pod-wandb",
        state,
        f"python3 -c '{script}' && bash -lc 'PYTHONPATH=$PYTHONPATH:$HOME/pkgs python3 $HOME/train.py'",
    )
    assert "lucky-run" in said, said
    runs = backend.experiment_runs(key="pod-wandb", state=state)
    assert [(r["url"], r["name"], r["project"]) for r in runs] == [(RUN_URL, "lucky-run", "demo")]


def test_a_tenant_made_under_another_home_root_is_moved_to_the_current_one(tmp_path):
    import os
    import pwd

    from providers.slurm.tenants import TenantAccounts

    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("creating tenant users needs root and useradd")
    owner = tenant(9305)
    old_root, new_root = tmp_path / "old", tmp_path / "new"
    TenantAccounts(mode="create", home_root=old_root).ensure(owner)
    assert pwd.getpwnam(owner.name).pw_dir == str(old_root / owner.name)
    TenantAccounts(mode="create", home_root=new_root).ensure(owner)  # the console's folder moved
    assert pwd.getpwnam(owner.name).pw_dir == str(new_root / owner.name)
    storage = (new_root / owner.name / ".config/containers/storage.conf").read_text()
    assert f'graphroot = "{new_root / owner.name}/.local/share/containers/storage"' in storage
