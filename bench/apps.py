"""Benchmark: from "Deploy" to the first answer through the console's proxy, for the marketplace's apps
that run here for real (the local backend's containers, no GPU):

- the CPU chat (SmolLM2 chat's llama.cpp variant) with its image cached on the host;
- the CPU chat with its image not on the host: a store of its own, empty, so the image the console
  published to its registry (``manage.py images_publish``, as `make run` does) is pulled first;
- MLflow (its image cached).

"Deploy" is ``deployment_create`` (what the Deploy button's view calls: fit check, quota, balance,
placement, billing); the worker's task runs eagerly in this process and the instance is polled as the
worker's beat would. "First answer" is the first 200 through the proxy with the deployment's key: a
chat completion with content for the chat, the experiments list for MLflow. The images are the ones
`make images` built (images/llama-server, images/mlflow); a missing one is built first (cached).

It makes its own PostgreSQL database (console_bench_apps, dropped at the end) and prints one JSON line.
The goal (issue #32): under 60 s with the image cached; the seed promises three minutes on a GPU.

    .venv/bin/python bench/apps.py
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = os.environ.get("BENCH_DB_NAME", "console_bench_apps")
os.environ.update(
    CONSOLE_ENV="test",
    DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    DJANGO_SETTINGS_MODULE="console.settings",
    CELERY_TASK_ALWAYS_EAGER="1",
)
os.environ.setdefault("TEST_REDIS_URL", "redis://127.0.0.1:6379/14")
TIMEOUT_S = 600  # wall-clock: a first pull and a first start on a busy 2-core host
# BENCH_APPS=mlflow (comma-separated: cpu-chat, cpu-chat-uncached, mlflow) measures only those.
WANTED = set((os.environ.get("BENCH_APPS") or "cpu-chat,cpu-chat-uncached,mlflow").split(","))


def _psql(sql: str) -> None:
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql], check=True, capture_output=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _registry(folder: Path) -> tuple[subprocess.Popen, str]:
    """Debian's registry on a free port, its blobs in ``folder``."""
    port = _free_port()
    config = folder / "registry.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the registry did not start")


def _empty_store(folder: Path) -> Path:
    """A podman configuration like the console's, over an image store of its own that holds nothing."""
    from providers.local.runtime.podman import Podman

    main = Podman().conf_dir.resolve()
    conf = folder / "containers"
    conf.mkdir(parents=True)
    text = (main / "containers.conf").read_text()
    text = text.replace(str(main / "run"), str(conf / "run")).replace(str(main / "tmp"), str(conf / "tmp"))
    (conf / "containers.conf").write_text(text)
    (conf / "storage.conf").write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{conf / "storage"}"\nrunroot = "{conf / "run/storage"}"\n'
        '[storage.options.overlay]\nmountopt = "nodev"\n'
    )
    (conf / "tmp").mkdir()
    return conf


def _answer(base_url: str, instance, key: str, app_slug: str) -> bool:
    import httpx

    app = f"{base_url}/i/{instance.pk}/app/"
    bearer = {"Authorization": f"Bearer {key}"}
    try:
        if app_slug == "mlflow":
            response = httpx.get(f"{app}api/2.0/mlflow/experiments/search?max_results=1", headers=bearer, timeout=30)
            return response.status_code == 200 and "experiments" in response.json()
        body = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0}
        response = httpx.post(f"{app}v1/chat/completions", json={**body, "max_tokens": 16}, headers=bearer, timeout=60)
        return response.status_code == 200 and bool(response.json()["choices"][0]["message"]["content"])
    except (httpx.HTTPError, ValueError, KeyError):
        return False


def _deploy_to_first_answer(user, app_slug: str, parameters: dict, base_url: str, volumes=()) -> float:
    from apps_marketplace.models import App
    from apps_marketplace.services import deployment_create, deployment_delete
    from instances.models import GpuModel, Region
    from instances.services import instance_sync

    started = time.monotonic()
    # Autocommit: the launch's task runs (eagerly, in this process) as its transaction commits.
    app = App.objects.get(slug=app_slug)
    deployment, key = deployment_create(
        user=user,
        app=app,
        model=app.default_model,  # the chat's SmolLM2 (its CPU variant serves the GGUF in its image)
        parameters=parameters,
        gpu_model=GpuModel.objects.get(slug="h200"),
        gpu_count=1,
        region=Region.objects.get(slug="local"),
        volumes=volumes,
    )
    instance = deployment.instance
    while True:
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        if instance.status == "failed":
            raise SystemExit(f"{app_slug}: the launch failed: {instance.status_reason}")
        if instance.status == "running" and _answer(base_url, instance, key, app_slug):
            seconds = time.monotonic() - started
            break
        if time.monotonic() - started > TIMEOUT_S:
            raise SystemExit(f"{app_slug}: no answer within {TIMEOUT_S} s (status {instance.status})")
        time.sleep(0.25)
    deployment_delete(deployment=deployment)
    return round(seconds, 2)


def main() -> None:
    import importlib.util

    _psql(f"DROP DATABASE IF EXISTS {DB_NAME}")
    _psql(f"CREATE DATABASE {DB_NAME}")
    scratch = Path(tempfile.mkdtemp(prefix="bench-apps-"))
    registry = None
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from accounts.tests.factories import UserFactory
        from apps_marketplace.loaders import marketplace_catalogue_load
        from apps_marketplace.tests.app_images import IMAGES
        from instances.catalogue import catalogue_seed
        from instances.tests.conftest import fund
        from providers.local.runtime.podman import Podman
        from providers.local.tests.local_helpers import asgi_server, local_backends

        spec = importlib.util.spec_from_file_location("console_images", ROOT / "scripts/images.py")
        images = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(images)
        built_at = time.monotonic()
        names = (["llama-server"] if WANTED & {"cpu-chat", "cpu-chat-uncached"} else []) + (
            ["mlflow"] if "mlflow" in WANTED else []
        )
        images.build(names, podman=Podman(), quiet=True)
        build_check_s = round(time.monotonic() - built_at, 2)

        user = UserFactory(email="bench-apps@example.com")
        fund(user, 10_000_000)
        # Deployments' keys open their apps through the proxy: console.hooks.proxy_target's own answer.
        limits = {"CPUS": 2, "MEMORY_GB": 2, "MAX_MEMORY_GB": 4, "PIDS_LIMIT": 1024}

        def use_host(root: Path, **options) -> None:
            settings.PROVISIONING_BACKENDS = local_backends(
                root, services=(), ENGINE="podman", LIMITS=limits, **options
            )

        result: dict[str, float | str] = {"build_check_s": build_check_s}
        # Cached: the host maps the catalogue's slugs to the images `make images` left in its store.
        use_host(scratch / "cached", IMAGES=IMAGES)
        catalogue_seed()  # the region "local" of the backend just configured
        marketplace_catalogue_load()
        with asgi_server() as base_url:
            if "cpu-chat" in WANTED:
                result["cpu_chat_cached_deploy_to_answer_s"] = _deploy_to_first_answer(
                    user, "smollm2-chat", {}, base_url
                )
            if "mlflow" in WANTED:
                result["mlflow_cached_deploy_to_answer_s"] = _deploy_to_first_answer(
                    user, "mlflow", {"store_dir": "/home/user/mlflow"}, base_url
                )
            if "cpu-chat-uncached" in WANTED:
                # Not cached: published to a registry (as `make run` does), pulled into an empty store.
                (scratch / "registry").mkdir()
                registry, address = _registry(scratch / "registry")
                settings.CONSOLE_REGISTRY, settings.CONSOLE_REGISTRY_TLS_VERIFY = address, False
                published_at = time.monotonic()
                with open(os.devnull, "w") as quiet:
                    call_command("images_publish", "llama-server", records=str(ROOT / "var/images"), stdout=quiet)
                result["cpu_chat_publish_s"] = round(time.monotonic() - published_at, 2)
                store = _empty_store(scratch / "store")
                use_host(scratch / "uncached", CONTAINERS_DIR=str(store))
                result["cpu_chat_uncached_deploy_to_answer_s"] = _deploy_to_first_answer(
                    user, "smollm2-chat", {}, base_url
                )
                # Proof that it was pulled: the empty store now holds the image, by its pinned digest.
                listed = Podman(conf_dir=store).run("images", "--format", "json", check=False, timeout=60)
                pulled = json.loads(listed.stdout or "[]")
                result["cpu_chat_uncached_pulled_images"] = len(pulled)
                result["cpu_chat_uncached_pulled_bytes"] = sum(int(i.get("Size") or 0) for i in pulled)
                manifest = json.loads((ROOT / "var/images/llama-server.json").read_text())
                result["cpu_chat_image_bytes"] = int(manifest.get("size_bytes") or 0)
        result["host_cpus"] = os.cpu_count() or 0
        result["host_load_1min"] = round(os.getloadavg()[0], 2)
        print(json.dumps(result))
    finally:
        if registry is not None:
            registry.terminate()
            registry.wait(10)
        from django.db import connections

        connections.close_all()
        shutil.rmtree(scratch, ignore_errors=True)
        _psql(f"DROP DATABASE IF EXISTS {DB_NAME}")


if __name__ == "__main__":
    main()
