"""Instances on the local backend run in containers of their image, each tenant in a uid range of its own.

- The owner reaches JupyterLab through the console's proxy; a stranger gets 404; stop keeps the disk
  and leaves no process, start brings it back, release leaves nothing.
- Isolation: from inside one tenant's machine (a shell as its user, uid 1000), another tenant's
  files, processes, ports and secrets cannot be reached, nor a service of the host listening on every
  interface (the firewall); its uid map is its own range, not the
  host's identity; an allocation over its memory limit is killed and the owner is told.
- The image applies: two images that differ are launched, and each shows its own /etc/os-release
  over SSH and in a JupyterLab kernel through the proxy.
- A pull that fails says why and bills nothing.

The images are built once per session (``scripts/images.py build``, cached by their inputs).
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
from pathlib import Path

import httpx
import psutil
import pytest
from websockets.sync.client import connect

from accounts.services import ssh_key_add
from apps_marketplace.proxy_targets import deployment_proxy_target
from billing.models import Meter
from billing.services import balance_get
from console.hooks import proxy_target
from console.tests.conftest import session_cookie
from console.tests.test_proxy_websocket import _execute
from instances.models import Image, InstanceEvent
from instances.services import instance_release, instance_start, instance_stop, instance_sync
from instances.tests.conftest import committed, fund, launch
from providers.local.runtime.container_spec import _network_name
from providers.local.tests.local_helpers import asgi_server, wait_running, wait_until
from providers.local.tests.test_local_sshd import _keypair, _ssh

pytestmark = [pytest.mark.local, pytest.mark.containers, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]
MINIMAL = "localhost/console/minimal:latest"
ALT = "localhost/console/minimal-alt:latest"
BOOT_S = 180  # wall-clock: JupyterLab's first start in a 1-CPU container on a busy 2-core CI host


@pytest.fixture(scope="session")
def container_images():
    """The minimal image and its variant, built once (cached: a second or two when nothing changed)."""
    spec = importlib.util.spec_from_file_location("console_images", ROOT / "scripts/images.py")
    images = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(images)
    from providers.local.runtime.podman import Podman, PodmanError

    podman = Podman()
    if podman.missing():
        pytest.skip(podman.missing())
    try:
        return images.build(["minimal-alt"], podman=podman, quiet=True)
    except (PodmanError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the instance images could not be built: {exc}")


@pytest.fixture
def in_containers(this_host, container_images):
    """``in_containers(services=("lab",))``: the local backend with the podman engine, small limits."""

    def make(*, services=("lab",), **options):
        return this_host(
            services=services,
            ENGINE="podman",
            LIMITS={"CPUS": 1, "MEMORY_GB": 1, "MAX_MEMORY_GB": 2, "PIDS_LIMIT": 256},
            IMAGES={"pytorch-2.5-cu124": MINIMAL, "cuda-12.4-ubuntu22.04": ALT},
            **options,
        )

    return make


def _exec(backend, key: str, command: str) -> subprocess.CompletedProcess:
    """A shell in the machine as its user (uid 1000), as the owner's terminal would be."""
    return backend.runtime.podman.run(
        "exec", "--user", "1000", backend.runtime.container_name(key), "sh", "-c", command, check=False
    )


def test_the_owner_reaches_jupyterlab_in_a_container_and_stop_start_release_keep_what_they_should(
    in_containers, rich_alice, charlie
):
    backend = in_containers(services=("lab", "ssh"))
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", disk_gb=20)
    wait_running(instance, timeout=BOOT_S)
    key = instance.key
    host_key = backend.runtime.host_key(key)
    assert host_key.startswith("ssh-ed25519 ")
    assert _exec(backend, key, "cat /run/console-hostkeys/ssh_host_ed25519_key").returncode != 0  # root's only
    assert backend.runtime.meta(key)["image"] == MINIMAL
    # The image's Python environment is the user's: a pip install lands in the container (kept by a stop,
    # saved by "Save as image"), not on the disk.
    assert (
        _exec(
            backend,
            key,
            "test -w /opt/venv/bin && test -w \"$(python3 -c 'import site; print(site.getsitepackages()[0])')\"",
        ).returncode
        == 0
    )
    pid = backend.runtime.container_pid(key)
    uid_map = Path(f"/proc/{pid}/uid_map").read_text().split()
    tenant = backend.runtime.meta(key)["tenant"]
    assert uid_map == ["0", str(tenant["uid_base"]), "65536"]

    with asgi_server() as base_url:
        lab = f"{base_url}/i/{instance.pk}/lab/"
        owner = {"sessionid": session_cookie(rich_alice)["sessionid"]}
        assert httpx.get(f"{lab}api/status", cookies=owner, timeout=10).status_code == 200
        stranger = {"sessionid": session_cookie(charlie)["sessionid"]}
        assert httpx.get(f"{lab}api/status", cookies=stranger, timeout=10).status_code == 404

    written = _exec(backend, key, "echo kept > ~/notes.txt && df -P ~ | tail -1")
    assert written.returncode == 0, written.stderr
    size_kb = int(written.stdout.split()[1])
    assert 19 * 2**20 < size_kb <= 20 * 2**20  # the disk is the 20 GB asked for, not the host's

    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == "stopped"
    assert backend.runtime.processes(key) == []  # nothing of it runs
    assert backend.runtime.gpus.get(key) == []

    with committed():
        instance_start(instance=instance)
    wait_running(instance, timeout=BOOT_S)
    assert _exec(backend, key, "cat ~/notes.txt").stdout.strip() == "kept"
    # The same host key after a start, so the SSH gateway's pin (trust on first use) still holds.
    served = backend.runtime.podman.run(
        "exec", backend.runtime.container_name(key), "cat", "/run/console/ssh/ssh_host_ed25519_key.pub"
    )
    assert served.stdout.split()[:2] == host_key.split()[:2]

    base = backend.runtime.paths(key).base
    with committed():
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == "released"
    assert not backend.runtime.podman.container_exists(backend.runtime.container_name(key))
    assert not base.exists()


def test_one_tenant_cannot_reach_anothers_files_processes_ports_or_secrets_and_memory_is_limited(
    in_containers, rich_alice, bob
):
    backend = in_containers(services=("lab",))
    fund(bob, 1_000_000)
    with committed():
        mine = launch(rich_alice, gpu="h200", region="local", disk_gb=20)
        theirs = launch(bob, gpu="h200", region="local", disk_gb=20)
    wait_running(mine, timeout=BOOT_S)
    wait_running(theirs, timeout=BOOT_S)
    runtime = backend.runtime
    a, b = mine.key, theirs.key
    assert _exec(backend, b, "echo secret-of-bob > ~/private.txt").returncode == 0
    b_meta = runtime.meta(b)
    b_token = b_meta["secrets"]["lab"]
    b_host_paths = [
        runtime.paths(b).home / "private.txt",
        runtime.paths(b).secrets / "lab_token",
        runtime.paths(b).meta,
    ]

    # Files: none of bob's host paths exists in alice's machine, and her home is hers alone.
    for path in b_host_paths:
        assert _exec(backend, a, f"cat {path}").returncode != 0
    assert "secret-of-bob" not in _exec(backend, a, "grep -rs secret-of-bob / --exclude-dir=proc; true").stdout
    # Processes: only her own (her JupyterLab's base URL, never his).
    processes = _exec(backend, a, "ps -eo user,args").stdout
    assert f"/i/{a}/lab/" in processes and f"/i/{b}/" not in processes
    # Secrets: her folder holds her token only.
    assert _exec(backend, a, "cat /run/console-secrets/lab_token").stdout.strip() == runtime.meta(a)["secrets"]["lab"]
    assert b_token not in _exec(backend, a, "cat /run/console-secrets/*").stdout
    # Ports: his published port is on the host's loopback, not hers; his container's own address
    # is on another tenant's network, isolated from hers.
    b_port = runtime.ports.get(b)["lab"]
    b_address = _container_address(runtime, b)
    probe = (
        "import socket, sys\n"
        "for host, port in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        "    try:\n"
        "        socket.create_connection((host, int(port)), timeout=3).close(); print('open', host, port)\n"
        "    except OSError:\n"
        "        print('closed', host, port)\n"
    )
    # The host: a service of it that listens on every interface is out of reach too, at the network's
    # gateway and at the host's other addresses (the firewall, providers/local/runtime/firewall.py).
    host_service = socket.create_server(("0.0.0.0", 0))  # noqa: S104 (the service a container must not reach)
    host_port = host_service.getsockname()[1]
    gateway = runtime.podman.inspect("network", _network_name(runtime.meta(a)["tenant"]))["subnets"][0]["gateway"]
    host_addresses = [
        address.address
        for name, addresses in psutil.net_if_addrs().items()
        for address in addresses
        if address.family == socket.AF_INET and not address.address.startswith(("127.", "10.88.", "10.89."))
    ][:1]
    targets = ["127.0.0.1", str(b_port), b_address, "8888", gateway, str(host_port)]
    for address in host_addresses:
        targets += [address, str(host_port)]
    try:
        reached = runtime.podman.run(
            "exec", "--user", "1000", runtime.container_name(a), "python3", "-c", probe, *targets, check=False,
        ).stdout  # fmt: skip
    finally:
        host_service.close()
    assert reached.split("\n")[:3] == [
        f"closed 127.0.0.1 {b_port}",
        f"closed {b_address} 8888",
        f"closed {gateway} {host_port}",
    ], reached
    assert "open" not in reached, reached
    # Its user namespace is its tenant's range, not the host's identity map.
    uid_map = _exec(backend, a, "cat /proc/self/uid_map").stdout.split()
    assert uid_map[:2] != ["0", "0"] and uid_map[1] == str(runtime.meta(a)["tenant"]["uid_base"])
    assert runtime.meta(a)["tenant"]["uid_base"] != b_meta["tenant"]["uid_base"]

    # Memory: 1 GB is the limit; 1.5 GB is killed, and the owner hears why.
    hog = _exec(backend, a, "python3 -c 'b = bytearray(1536 * 2**20); print(len(b))'")
    assert hog.returncode == 137, (hog.returncode, hog.stdout, hog.stderr)
    instance_sync(instance_id=mine.pk)
    reasons = list(InstanceEvent.objects.filter(instance=mine).values_list("reason", flat=True))
    assert any("Out of memory" in str(reason) for reason in reasons), reasons
    wait_until(lambda: instance_sync(instance_id=mine.pk) is not None and _status(mine) == "running", timeout=30)


def _status(instance) -> str:
    instance.refresh_from_db()
    return instance.status


def _container_address(runtime, key: str) -> str:
    info = runtime.podman.inspect("container", runtime.container_name(key))
    networks = info["NetworkSettings"]["Networks"]
    return next(iter(networks.values()))["IPAddress"]


def test_each_image_shows_its_own_os_release_over_ssh_and_in_jupyterlab(in_containers, rich_alice, tmp_path):
    backend = in_containers(services=("lab", "ssh"))
    key_file, public = _keypair(tmp_path, "alice-laptop")
    laptop = ssh_key_add(user=rich_alice, name="laptop", public_key=public)
    with committed():
        plain = launch(rich_alice, gpu="h200", region="local", image="pytorch-2.5-cu124", ssh_keys=[laptop], disk_gb=20)
        alt = launch(
            rich_alice, gpu="h200", region="local", image="cuda-12.4-ubuntu22.04", ssh_keys=[laptop], disk_gb=20
        )
    wait_running(plain, timeout=BOOT_S)
    wait_running(alt, timeout=BOOT_S)
    expected = {plain: "Debian GNU/Linux 12 (bookworm)", alt: "Console minimal-alt (Debian 12 bookworm)"}

    for instance, pretty in expected.items():
        target = backend.ssh_target(key=instance.key)
        assert target.user == "user"
        known_hosts = tmp_path / f"known_hosts-{instance.pk}"
        host_key = backend.runtime.host_key(instance.key).split()
        known_hosts.write_text(f"[127.0.0.1]:{target.port} {host_key[0]} {host_key[1]}\n")
        result = _ssh(key_file, target.port, known_hosts, target.user, ". /etc/os-release; echo $PRETTY_NAME; id -u")
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [pretty, "1000"]

    with asgi_server() as base_url:
        cookie = session_cookie(rich_alice)["sessionid"]
        for instance, pretty in expected.items():
            lab = f"{base_url}/i/{instance.pk}/lab/"
            kernel = httpx.post(
                f"{lab}api/kernels",
                json={"name": "python3"},
                cookies={"sessionid": cookie},
                headers={"Origin": base_url},
                timeout=60,
            )
            assert kernel.status_code == 201, kernel.text
            channels = f"{lab.replace('http://', 'ws://')}api/kernels/{kernel.json()['id']}/channels"
            with connect(channels, origin=base_url, additional_headers={"Cookie": f"sessionid={cookie}"}) as ws:
                code = "import os, re; print(re.search(r'PRETTY_NAME=\"(.*)\"', open('/etc/os-release').read())[1], os.getuid())"
                assert _execute(ws, code) == f"{pretty} 1000\n"


def test_a_pull_that_fails_says_why_and_bills_nothing(in_containers, rich_alice):
    in_containers(services=("lab",))
    Image.objects.filter(slug="pytorch-2.5-cu124").update(
        repository="127.0.0.1:9/console/nowhere", digest="sha256:" + "0" * 64
    )
    before = balance_get(user=rich_alice).total
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", disk_gb=20)
    instance.refresh_from_db()
    assert instance.image_ref == "127.0.0.1:9/console/nowhere@sha256:" + "0" * 64
    assert instance.status == "failed"
    assert "could not be pulled" in str(instance.status_reason)
    assert not Meter.objects.filter(ref__startswith=f"instance:{instance.pk}").exists()
    assert balance_get(user=rich_alice).total == before


@pytest.fixture
def registry(tmp_path):
    """Debian's registry (distribution) on a free 127.0.0.1 port, storage in ``tmp_path``."""
    import shutil
    import socket

    from providers.local.tests.local_helpers import free_port

    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("docker-registry is not installed (make container-deps)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'registry'}\n"
        "  delete:\n    enabled: true\n"  # as make run's (console.embedded): a deleted saved image leaves it
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening():
        try:
            # wall-clock: one attempt; wait_until retries for 30 s
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    try:
        wait_until(listening, timeout=30, what="the registry to listen")
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_launch_runs_the_image_its_pinned_digest_names_pulled_from_the_registry(in_containers, rich_alice, registry):
    backend = in_containers(services=("lab",))
    podman = backend.runtime.podman
    podman.run("push", "--tls-verify=false", ALT, f"{registry}/console/minimal-alt:v1", timeout=300)
    digest = json.loads(
        subprocess.run(
            ["skopeo", "inspect", "--tls-verify=false", f"docker://{registry}/console/minimal-alt:v1"],
            capture_output=True, text=True, check=True, env=podman.env(),
        ).stdout
    )["Digest"]  # fmt: skip
    Image.objects.filter(slug="pytorch-2.3-cu121").update(repository=f"{registry}/console/minimal-alt", digest=digest)

    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", image="pytorch-2.3-cu121", disk_gb=20)
    wait_running(instance, timeout=BOOT_S)
    pinned = f"{registry}/console/minimal-alt@{digest}"
    assert instance.image_ref == pinned and backend.runtime.meta(instance.key)["image"] == pinned
    assert "Console minimal-alt" in _exec(backend, instance.key, "cat /etc/os-release").stdout


def test_a_port_declared_after_launch_answers_its_owner_and_a_share_link_without_being_published(
    in_containers, rich_alice, charlie, tmp_path
):
    from ports.services import port_declare, share_create

    datasets = tmp_path / "datasets"
    datasets.mkdir()
    (datasets / "README").write_text("public data\n")
    # A public folder the operator has not made is left out (a fresh `make run` has none), not an error.
    public = {"/models": str(tmp_path / "not-made"), "/datasets": str(datasets)}
    backend = in_containers(services=("lab",), PUBLIC_MOUNTS=public)
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", disk_gb=20)
    wait_running(instance, timeout=BOOT_S)
    name = backend.runtime.container_name(instance.key)
    published = backend.runtime.podman.run("port", name).stdout
    port = 9123  # the container's own: its network namespace is its own
    # What a notebook cell does: a server on every interface of the machine, started after launch.
    started = backend.runtime.podman.run(
        "exec", "-d", "--user", "1000", "--workdir", "/home/user", name, "sh", "-c",
        "mkdir -p site && echo '<h1>Made in a cell</h1>' > site/index.html"
        f" && exec python3 -m http.server {port} --directory site",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert _exec(backend, instance.key, "cat /datasets/README; ls /models").stdout.strip() == "public data"
    declared = port_declare(instance=instance, port=port)
    share = share_create(port=declared, actor=rich_alice)

    with asgi_server() as base_url:
        url = f"{base_url}/i/{instance.pk}/p{port}/"
        owner = {"sessionid": session_cookie(rich_alice)["sessionid"]}

        def answers():
            return httpx.get(url, cookies=owner, timeout=10).status_code == 200

        wait_until(answers, timeout=30, what="the owner's server to answer through the proxy")
        assert "Made in a cell" in httpx.get(url, cookies=owner, timeout=10).text
        stranger = {"sessionid": session_cookie(charlie)["sessionid"]}
        assert httpx.get(url, cookies=stranger, timeout=10).status_code == 404
        shared = httpx.get(f"{base_url}{share.url}", timeout=10)  # anyone with the link, signed out
        assert shared.status_code == 200 and "Made in a cell" in shared.text
    # Served on the container's own address: nothing was published for it, before or after.
    assert backend.runtime.podman.run("port", name).stdout == published
    assert str(port) not in published


def test_a_one_click_app_runs_in_the_instances_container_and_answers_its_owner_and_key(
    in_containers, rich_alice, charlie, settings, hooks_override
):
    from apps_marketplace.models import App
    from apps_marketplace.services import deployment_create
    from instances.models import GpuModel, Region

    backend = in_containers(services=("lab",))
    hooks_override(proxy_target, deployment_proxy_target)
    # A server the image has (Python's), serving the image's /etc: the page shows which image it runs in.
    app = App.objects.create(
        slug="etc-browser",
        name="Etc browser",
        tagline="Serves /etc",
        description="Python's file server.",
        category="notebook-tools",
        engine="test",
        image="example/etc:1",
        image_size_bytes=1,
        command_template="python3 -m http.server {port} --bind {host} --directory /etc",
        port=7860,
        gpu_required=False,
    )
    with committed():
        deployment, key = deployment_create(
            user=rich_alice,
            app=app,
            model=None,
            parameters={},
            gpu_model=GpuModel.objects.get(slug="h200"),
            gpu_count=1,
            region=Region.objects.get(slug="local"),
        )
    instance = wait_running(deployment.instance, timeout=BOOT_S)

    with asgi_server() as base_url:
        page = f"{base_url}/i/{instance.pk}/app/console-image"
        owner = httpx.get(page, cookies=session_cookie(rich_alice), timeout=10)
        assert owner.status_code == 200 and owner.text.strip() == "minimal-alt"  # the deployment's base image
        by_key = httpx.get(page, headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert by_key.status_code == 200
        assert httpx.get(page, cookies=session_cookie(charlie), timeout=10).status_code == 404
        assert httpx.get(page, timeout=10).status_code == 404
    # It runs as the machine's user inside the container, not on this host.
    top = backend.runtime.podman.run("top", backend.runtime.container_name(instance.key), "user", "args").stdout
    assert any(line.split()[0] == "user" and "http.server 7860" in line for line in top.splitlines()), top


def test_a_failed_pull_reads_as_a_failed_boot_and_the_node_reports_the_images_it_holds(in_containers, rich_alice):
    from instances.models import Region
    from instances.selectors import launch_images
    from instances.services import nodes_sync
    from providers.base import BOOT_FAILED, InstanceSpec, Observed, PermanentBackendError, Tenant

    backend = in_containers(services=("lab",))
    nowhere = "127.0.0.1:9/console/nowhere@sha256:" + "0" * 64
    spec = InstanceSpec(
        node="host", gpu_model="h200", gpu_count=1, image="pytorch-2.5-cu124", image_ref=nowhere, disk_gb=10,
        tenant=Tenant(name="gpuc-t9", uid=70009, uid_base=16777216 + 9 * 65536),
    )  # fmt: skip
    with pytest.raises(PermanentBackendError, match="could not be pulled"):
        backend.create(key="pullfails", spec=spec)
    # Whichever worker polls it next hears that this boot cannot succeed, and why.
    observation = backend.poll(key="pullfails", state={})
    assert (observation.state, observation.stage) == (Observed.PENDING, BOOT_FAILED)
    assert "could not be pulled" in observation.detail
    backend.destroy(key="pullfails", state={})

    # The node's cache, as podman lists it: the mapped slugs and the digests a launch would pin.
    [node] = backend.nodes()
    minimal = backend.runtime.podman.inspect("image", MINIMAL)
    assert "pytorch-2.5-cu124" in node.images and "cuda-12.4-ubuntu22.04" in node.images
    assert minimal["Digest"] in node.images
    assert not any("0" * 64 in image for image in node.images)
    nodes_sync(alias="local")
    rows = {row["image"].slug: row for row in launch_images(regions=[Region.objects.get(slug="local")])}
    assert [c["cached"] for c in rows["pytorch-2.5-cu124"]["cache"]] == [1]


def test_make_runs_publish_puts_the_minimal_image_in_the_registry_and_a_launch_pins_its_digest(
    in_containers, rich_alice, registry, settings, tmp_path
):
    from django.core.management import call_command

    from console.embedded import EmbeddedRegistry
    from console.run import images_to_publish

    backend = in_containers(services=("lab",))
    # What `CONSOLE_LOCAL_BACKEND=1 make run` publishes at start, to its own registry only.
    records = ROOT / "var/images"  # where the build wrote them
    embedded = EmbeddedRegistry(tmp_path / "registry")
    built = [name for name in ("minimal", "llama-server", "mlflow") if (records / f"{name}.json").is_file()]
    assert built[0] == "minimal"  # and the apps' images where this host built them
    assert images_to_publish({"CONSOLE_LOCAL_BACKEND": "1"}, records=records, registry=embedded) == built
    assert images_to_publish({"CONSOLE_LOCAL_BACKEND": "1"}, records=records, registry=None) == []
    assert images_to_publish({}, records=records, registry=embedded) == []

    settings.CONSOLE_REGISTRY, settings.CONSOLE_REGISTRY_TLS_VERIFY = registry, False
    call_command("images_publish", "minimal", records=str(records))  # what it runs (and `make images-publish`)
    image = Image.objects.get(slug="python-3.11-minimal")
    assert image.repository == f"{registry}/console/minimal" and image.digest.startswith("sha256:")
    assert image.contents["jupyterlab"] and image.is_active

    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", image=image.slug, disk_gb=20)
    wait_running(instance, timeout=BOOT_S)
    pinned = f"{registry}/console/minimal@{image.digest}"
    assert instance.image_ref == pinned and backend.runtime.meta(instance.key)["image"] == pinned


def _cgroup_limits(backend, key: str) -> tuple[float, int]:
    """The container's CPU quota (cores) and memory limit (bytes), read inside it (cgroup v1 or v2)."""
    probe = (
        "if [ -f /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max;"
        " else cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us"
        " /sys/fs/cgroup/memory/memory.limit_in_bytes; fi"
    )
    words = _exec(backend, key, probe).stdout.split()
    quota, period, memory = int(words[0]), int(words[1]), int(words[2])
    return round(quota / period, 2), memory


def test_a_start_without_gpu_is_held_to_its_allowance_and_a_start_with_cards_gets_the_catalogues_back(
    this_host, container_images, rich_alice, settings
):
    settings.INSTANCES_NO_GPU_CPUS = 0.5
    settings.INSTANCES_NO_GPU_MEMORY_GB = 1
    backend = this_host(
        services=("lab",),
        ENGINE="podman",
        LIMITS={"MAX_CPUS": 2, "MAX_MEMORY_GB": 2, "PIDS_LIMIT": 256},  # the catalogue's h200 asks for more
        IMAGES={"pytorch-2.5-cu124": MINIMAL},
    )
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", disk_gb=20)
    wait_running(instance, timeout=BOOT_S)
    key = instance.key
    with_cards = _cgroup_limits(backend, key)
    assert with_cards == (2.0, 2 * 2**30)
    assert _exec(backend, key, "echo kept > /tmp/../home/user/mark && touch /var/tmp/layer").returncode == 0

    with committed():
        instance_stop(instance=instance)
    with committed():
        instance_start(instance=instance, no_gpu=True)
    wait_running(instance, timeout=BOOT_S)
    assert _cgroup_limits(backend, key) == (0.5, 2**30)
    # The same container: its writable layer is there (a new one would have lost it).
    assert _exec(backend, key, "test -f /var/tmp/layer && cat ~/mark").stdout.strip() == "kept"

    with committed():
        instance_stop(instance=instance)
    with committed():
        instance_start(instance=instance)
    wait_running(instance, timeout=BOOT_S)
    assert _cgroup_limits(backend, key) == with_cards
    with committed():
        instance_release(instance=instance)
