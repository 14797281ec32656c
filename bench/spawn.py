"""Spawn latency: launch → JupyterLab answering through the console's proxy, p50 over N runs.

    .venv/bin/python bench/spawn.py [--runs 10] [--engine podman|process] [--jupyterhub]
    .venv/bin/python bench/spawn.py --slurm [--runs 10] [--engine podman|process] [--image REF]

Ours: the local runtime starts an instance (``--engine podman``, the default: a container of the
minimal image, cached, in a tenant's uid range, with its disk made and mounted; ``process``: the
servers as host processes, as Slurm jobs run them), JupyterLab and sshd in it, and we time until
``GET /i/<id>/lab/api/status`` through the console's ASGI proxy (under uvicorn) returns 200.
The last line is JSON whose keys carry their units (``spawn_p50_s``).
The proxy runs with a bench resolver that skips the session lookup (one indexed query, about a
millisecond), so no user is written to any database.

Slurm (``--slurm``, as root, on the cluster ``make slurm`` runs on this host): the Slurm backend submits
the instance's job (``sbatch --uid`` as a bench tenant), and we time from the submission until
JupyterLab answers through the same proxy (``poll`` verifies the job's report first, as the console's
worker does). With ``--engine podman`` the job runs ``--image`` (default: the minimal image, pushed by
digest to a registry the bench starts on 127.0.0.1); one run first, not counted, caches it in the
tenant's store, so the figure is "with a cached image".

JupyterHub (``--jupyterhub``, when ``jupyterhub`` and ``configurable-http-proxy`` are installed):
DummyAuthenticator + SimpleLocalProcessSpawner, timing ``POST /hub/api/users/<u>/server`` until
``/user/<u>/api/status`` answers 200 through its proxy, the same measure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")


def _wait(predicate, timeout=120.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    raise TimeoutError("timed out")


class _BenchUser:
    is_authenticated = True
    pk = 0


def bench_resolver(*, instance_id, service, user):
    from providers.local.runtime import registry

    if SLURM_BACKEND:
        return SLURM_BACKEND[0].proxy_target(key=instance_id, service=service)
    return registry.proxy_target(registry.get_runtime(), key=instance_id, service=service)


SLURM_BACKEND: list = []  # the Slurm backend the bench's resolver asks (``--slurm``)


def _proxy_server(proxy, uvicorn) -> tuple[object, int]:
    async def app(scope, receive, send):
        scope = dict(scope, user=_BenchUser())
        await proxy._proxy_app(scope, receive, send)

    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    _wait(lambda: server.started)
    return server, port


def _registry_with(image: str, work: Path) -> tuple[subprocess.Popen, str]:
    """A docker-registry on 127.0.0.1 holding ``image`` (from the console's podman store): the process
    and the image's pinned reference there."""
    import httpx

    from providers.local.runtime.podman import Podman

    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (work / "registry.yml").write_text(
        f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {work}/data\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen(
        ["docker-registry", "serve", str(work / "registry.yml")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait(lambda: _ok(httpx, f"http://127.0.0.1:{port}/v2/", {}), timeout=30)
    podman = Podman()
    target = f"127.0.0.1:{port}/bench/minimal:bench"
    podman.run("push", "--tls-verify=false", image, target, timeout=600)
    inspect = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", f"docker://{target}"],
        capture_output=True, text=True, check=True, env=podman.env(),
    )  # fmt: skip
    return process, f"127.0.0.1:{port}/bench/minimal@{json.loads(inspect.stdout)['Digest']}"


def on_slurm(runs: int, engine: str = "podman", image: str = "") -> list[float]:
    import django

    django.setup()
    import httpx
    import uvicorn

    from console import reverse_proxy as proxy
    from console.hooks import proxy_target
    from instances.models import TenantRange
    from instances.tenancy import tenant_from_range
    from providers.base import InstanceSpec, Observed
    from providers.slurm.backend import SlurmBackend

    slurm_dir = ROOT / "var/slurm"
    if not (slurm_dir / "etc/slurm.conf").exists():
        raise SystemExit("no local Slurm cluster: start it with `make slurm`")
    work = Path(tempfile.mkdtemp(prefix="bench-slurm-", dir=slurm_dir))
    os.chmod(work, 0o711)  # noqa: S103 (the tenant's job passes through to its own folder)
    registry = None
    if engine == "podman" and not image:
        registry, image = _registry_with("localhost/console/minimal:latest", work)
    options = {
        "ROOT": str(work / "instances"),
        "SLURM_CONF": str(slurm_dir / "etc/slurm.conf"),
        "JOB_PREFIX": "console-bench-",
        "SERVICES": ["lab"],
        "GPU_TYPES": {"h200": "h200"},
        "TENANT_USERS": "create",
        "TENANT_HOME_ROOT": str(slurm_dir / "tenants"),
        "ENGINE": engine,
        "MAX_CPUS": 2,
        "MAX_MEMORY_GB": 2,
    }
    for name, path in (("PYTHON", "venvs/console/bin/python3"), ("JUPYTER_BIN", "venvs/jupyter/bin/jupyter")):
        if (slurm_dir / path).exists():
            options[name] = str(slurm_dir / path)
    backend = SlurmBackend(alias="slurm", options=options)
    SLURM_BACKEND[:] = [backend]
    overriding = proxy_target.override(bench_resolver)
    overriding.__enter__()
    server, port = _proxy_server(proxy, uvicorn)
    owner = tenant_from_range(TenantRange(pk=9990))
    times = []
    try:
        for run in range(runs + (1 if engine == "podman" else 0)):  # the first one pulls the image
            key = f"bench-{uuid.uuid4().hex[:12]}"
            url = f"http://127.0.0.1:{port}/i/{key}/lab/api/status"
            spec = InstanceSpec(
                node="", gpu_model="h200", gpu_count=1, image="minimal", image_ref=image, disk_gb=20, tenant=owner
            )
            seen = {}

            def answers(key=key, url=url, spec=spec, seen=seen):
                observation = backend.poll(key=key, state=seen["state"])
                seen["state"] = observation.backend_state or seen["state"]
                if observation.stage == "failed":
                    raise SystemExit(observation.detail)
                return observation.state == Observed.RUNNING and _ok(httpx, url, {})

            started = time.perf_counter()
            seen["state"] = backend.create(key=key, spec=spec)
            _wait(answers, timeout=600, interval=0.05)
            if run or engine != "podman":
                times.append(time.perf_counter() - started)
            backend.destroy(key=key, state=seen["state"])
    finally:
        server.should_exit = True
        if registry is not None:
            registry.terminate()
        shutil.rmtree(work, ignore_errors=True)
    return times


BENCH_TENANT = {"name": "bench", "uid": 69999, "uid_base": (1 << 24) + 4000 * 65536, "uid_count": 65536}


def ours(runs: int, engine: str = "podman") -> list[float]:
    import django

    django.setup()
    import httpx
    import uvicorn
    from django.conf import settings

    from console import reverse_proxy as proxy
    from console.hooks import proxy_target
    from providers.local.runtime import registry

    root = Path(tempfile.mkdtemp(prefix="bench-spawn-"))
    settings.LOCAL_RUNTIME = {"ROOT": root, "SERVICES": ["lab", "ssh"], "ENGINE": engine}
    # For the whole run (this process is the bench's). The context manager is kept: a generator-based
    # one that is dropped is closed by the garbage collector, which puts the console's resolver back.
    overriding = proxy_target.override(bench_resolver)
    overriding.__enter__()
    registry.get_runtime.cache_clear()
    runtime = registry.get_runtime()
    missing = runtime.missing_components()
    if missing:
        raise SystemExit("; ".join(missing.values()))

    async def app(scope, receive, send):
        scope = dict(scope, user=_BenchUser())
        await proxy._proxy_app(scope, receive, send)

    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    _wait(lambda: server.started)

    times = []
    try:
        for _ in range(runs):
            key = str(uuid.uuid4())
            url = f"http://127.0.0.1:{port}/i/{key}/lab/api/status"

            def answers(url=url):
                try:
                    return httpx.get(url, timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            started = time.perf_counter()
            if engine == "podman":
                runtime.start(key, gpus=["0"], tenant=BENCH_TENANT, cpus=2, memory_gb=4, disk_gb=20)
            else:
                runtime.start(key, gpus=["0"])
            _wait(answers)
            times.append(time.perf_counter() - started)
            runtime.destroy(key)
    finally:
        server.should_exit = True
        shutil.rmtree(root, ignore_errors=True)
    return times


HUB_CONFIG = """
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "simple"
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.services = [{{"name": "bench", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [{{"name": "bench", "scopes": ["admin:users", "admin:servers", "access:servers"],
                            "services": ["bench"]}}]
c.Spawner.args = ["--allow-root"]
c.Spawner.cmd = ["{jupyterhub_singleuser}"]
c.Spawner.default_url = "/lab"
c.JupyterHub.db_url = "sqlite:///{dir}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{dir}/cookie_secret"
"""


HUB_VENV = ROOT / "var/bench-hub"
HUB_INSTALL = (
    "python3 -m venv var/bench-hub && var/bench-hub/bin/pip install jupyterhub==6.1.1 jupyterlab==4.6.6 && "
    "npm install --prefix var/bench-hub/node configurable-http-proxy@5.3.0"
)


def jupyterhub(runs: int) -> list[float] | str:
    import httpx

    path = f"{HUB_VENV / 'bin'}:{HUB_VENV / 'node/node_modules/.bin'}:{os.environ.get('PATH', '')}"
    hub = shutil.which("jupyterhub", path=path)
    if not hub or not shutil.which("configurable-http-proxy", path=path):
        return f"not installed ({HUB_INSTALL})"
    work = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    token = uuid.uuid4().hex
    port, hub_port = 28000, 28081
    (work / "jupyterhub_config.py").write_text(
        HUB_CONFIG.format(
            port=port,
            hub_port=hub_port,
            token=token,
            dir=work,
            jupyterhub_singleuser=shutil.which("jupyterhub-singleuser", path=path),
        )
    )
    process = subprocess.Popen(
        [hub, "-f", str(work / "jupyterhub_config.py")],
        cwd=work,
        env={**os.environ, "PATH": path},
        stdout=open(work / "hub.log", "w"),  # noqa: SIM115
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"token {token}"}
    times = []
    try:
        _wait(lambda: _ok(httpx, f"{base}/hub/api/", headers), timeout=60)
        for i in range(runs):
            user = f"bench{i}"
            httpx.post(f"{base}/hub/api/users/{user}", headers=headers, timeout=30)
            started = time.perf_counter()
            httpx.post(f"{base}/hub/api/users/{user}/server", headers=headers, timeout=120)
            _wait(lambda user=user: _ok(httpx, f"{base}/user/{user}/api/status", headers))
            times.append(time.perf_counter() - started)
            httpx.delete(f"{base}/hub/api/users/{user}/server", headers=headers, timeout=30)
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return times


def _ok(httpx, url, headers) -> bool:
    try:
        return httpx.get(url, headers=headers, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _summary(name: str, result) -> str:
    if isinstance(result, str):
        return f"{name:<34} {result}"
    return (
        f"{name:<34} p50 {statistics.median(result):.2f} s   min {min(result):.2f} s   "
        f"max {max(result):.2f} s   ({len(result)} runs)"
    )


def main() -> None:
    import logging

    logging.disable(logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--engine", choices=("podman", "process"), default="podman")
    parser.add_argument("--jupyterhub", action="store_true", help="also measure JupyterHub side by side")
    parser.add_argument("--slurm", action="store_true", help="the Slurm backend on this host's test cluster")
    parser.add_argument("--image", default="", help="--slurm: the pinned image to run (default: minimal, pushed)")
    args = parser.parse_args()
    if args.slurm:
        mine = on_slurm(args.runs, args.engine, args.image)
        print(_summary(f"console Slurm job ({args.engine}) + proxy", mine))
    else:
        mine = ours(args.runs, args.engine)
        print(_summary(f"console local runtime ({args.engine}) + proxy", mine))
    figures = {
        "bench": "spawn_slurm" if args.slurm else "spawn",
        "engine": args.engine,
        "runs": args.runs,
        "spawn_p50_s": round(statistics.median(mine), 3),
        "spawn_min_s": round(min(mine), 3),
        "spawn_max_s": round(max(mine), 3),
    }
    if args.jupyterhub:
        hub = jupyterhub(args.runs)
        print(_summary("JupyterHub + SimpleLocalProcessSpawner", hub))
        figures["jupyterhub_p50_s"] = None if isinstance(hub, str) else round(statistics.median(hub), 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
