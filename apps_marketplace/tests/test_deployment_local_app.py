"""One-click deploy on the local backend, for real: the deployment's instance runs the app's own server
(TensorBoard, which starts without model weights), reached through the console's proxy at
``/i/<instance>/app/`` by its owner's session or by the deployment's API key, and by nobody else. An app
that dies on start fails the launch with its own last words and costs nothing; an app this host cannot
run is refused before anything is reserved."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import httpx
import psutil
import pytest

from apps_marketplace.models import App, Deployment
from apps_marketplace.proxy_targets import deployment_proxy_target
from apps_marketplace.selectors import deployment_endpoints, deployment_status
from apps_marketplace.services import deployment_create, deployment_redeploy
from billing.models import Meter
from billing.selectors import balance_get
from console.hooks import proxy_target
from console.tests.conftest import session_cookie
from instances.errors import LaunchInvalid
from instances.models import GpuModel, Instance, Region
from instances.services import instance_sync
from instances.tests.conftest import committed
from providers.local.tests.local_helpers import asgi_server, wait_running, wait_until

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def local_apps(this_host, settings, rich_alice, hooks_override):
    """This host as the region "local", running only the deployments' app servers (no JupyterLab), with
    the resolver that knows deployments' keys. Skips when TensorBoard is not installed."""
    backend = this_host(services=())
    hooks_override(proxy_target, deployment_proxy_target)
    tensorboard = App.objects.get(slug="tensorboard")
    from providers.base import AppLaunch

    why = backend.app_check(AppLaunch(name="tensorboard", argv=("tensorboard",)))
    if why:
        pytest.skip(f"{why} (run `make local-deps`)")
    return backend, tensorboard


def _deploy_local(user, app: App, **parameters) -> tuple[Deployment, str]:
    with committed():
        deployment, key = deployment_create(
            user=user,
            app=app,
            model=None,
            parameters=parameters,
            gpu_model=GpuModel.objects.get(slug="h200"),
            gpu_count=1,
            region=Region.objects.get(slug="local"),
        )
    deployment.instance.refresh_from_db()
    return deployment, key


def _write_scalars(logdir: Path, run: str, backend) -> None:
    """A training run's TensorBoard events, written by the instances' Python (where tensorboard is)."""
    python = str(Path(backend.runtime.jupyter_bin).parent / "python")
    script = textwrap.dedent(
        """
        import sys, time
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        writer = EventFileWriter(sys.argv[1])
        for step in range(5):
            value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])))
        writer.close()
        """
    )
    subprocess.run([python, "-c", script, str(logdir / run)], check=True, timeout=60)


def _app_process(key: str) -> psutil.Process:
    for process in psutil.process_iter():
        try:
            if process.environ().get("CONSOLE_INSTANCE_KEY") == key and "tensorboard" in " ".join(process.cmdline()):
                return process
        except psutil.Error:
            continue
    raise AssertionError("no TensorBoard process for the instance")


def test_tensorboard_serves_its_owner_and_its_key_holder_and_nobody_else(local_apps, rich_alice, charlie, tmp_path):
    backend, tensorboard = local_apps
    logs = tmp_path / "runs"
    _write_scalars(logs, "baseline", backend)
    deployment, key = _deploy_local(rich_alice, tensorboard, logdir=str(logs))
    instance = wait_running(deployment.instance)

    assert deployment_status(deployment=deployment).is_ready
    endpoints = deployment_endpoints(deployment=deployment, host="testserver")
    assert endpoints["serving"] and endpoints["webui_url"] == f"/i/{instance.pk}/app/"
    # A second deployment (on the simulated cloud) whose key must not open this one.
    other, other_key = _deploy_local_simulated(rich_alice)

    with asgi_server() as base_url:
        app = f"{base_url}/i/{instance.pk}/app/"
        owner = session_cookie(rich_alice)
        page = httpx.get(app, cookies=owner, timeout=10)
        assert page.status_code == 200 and "tensorboard" in page.text.lower()
        # The API a script uses, with the key alone: the training run is there.
        runs = httpx.get(f"{app}data/runs", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert runs.status_code == 200 and runs.json() == ["baseline"]
        tags = httpx.get(f"{app}data/plugin/scalars/tags", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert "loss" in tags.json()["baseline"]

        refused = [
            httpx.get(app, timeout=10),  # nobody
            httpx.get(app, cookies=session_cookie(charlie), timeout=10),  # a stranger
            httpx.get(app, headers={"Authorization": f"Bearer {other_key}"}, timeout=10),  # another deployment's key
            httpx.get(app, headers={"Authorization": "Bearer dk-not-a-key"}, timeout=10),
            # The key opens the app, not the machine's other servers.
            httpx.get(f"{base_url}/i/{instance.pk}/lab/", headers={"Authorization": f"Bearer {key}"}, timeout=10),
        ]
        assert [r.status_code for r in refused] == [404] * len(refused)
        # A wrong key is refused even beside the owner's own session: the key alone decides.
        both = httpx.get(app, cookies=owner, headers={"Authorization": f"Bearer {other_key}"}, timeout=10)
        assert both.status_code == 404

    # The app server listens on 127.0.0.1 only, with the port and prefix the runtime chose.
    process = _app_process(instance.key)
    port = backend.runtime.ports.get(instance.key)["app"]
    cmdline = process.cmdline()
    assert cmdline[cmdline.index("--host") + 1] == "127.0.0.1"
    assert cmdline[cmdline.index("--port") + 1] == str(port)
    assert cmdline[cmdline.index("--path_prefix") + 1] == f"/i/{instance.pk}/app"
    assert other.instance.status == "running"


def _deploy_local_simulated(user) -> tuple[Deployment, str]:
    from apps_marketplace.tests.conftest import deploy

    return deploy(user)


def test_redeploy_restarts_the_app_with_the_new_parameters(local_apps, rich_alice, tmp_path):
    backend, tensorboard = local_apps
    first, second = tmp_path / "first", tmp_path / "second"
    _write_scalars(first, "a", backend)
    _write_scalars(second, "b", backend)
    deployment, _key = _deploy_local(rich_alice, tensorboard, logdir=str(first))
    instance = wait_running(deployment.instance)
    before = _app_process(instance.key).pid

    with committed():
        deployment_redeploy(deployment=deployment, model=None, parameters={"logdir": str(second)})
    wait_running(instance)
    process = _app_process(instance.key)
    assert process.pid != before
    assert str(second) in process.cmdline()
    port = backend.runtime.ports.get(instance.key)["app"]
    runs = httpx.get(f"http://127.0.0.1:{port}/i/{instance.pk}/app/data/runs", timeout=10)
    assert runs.json() == ["b"]


def test_an_app_that_dies_on_start_fails_the_launch_with_its_reason_and_costs_nothing(local_apps, rich_alice, settings):
    settings.INSTANCES_CRASH_LIMIT = 2
    broken = App.objects.create(
        slug="broken-server",
        name="Broken server",
        tagline="Exits at once",
        description="A server whose model path is wrong.",
        category="notebook-tools",
        engine="test",
        image="example/broken:1",
        image_size_bytes=1,
        command_template=(
            "python3 -c \"import sys; print('loading weights from /weights/missing'); "
            "sys.exit('FileNotFoundError: /weights/missing/config.json')\" --port {port}"
        ),
        port=8000,
        gpu_required=False,
    )
    before = balance_get(user=rich_alice)
    deployment, _key = _deploy_local(rich_alice, broken)
    instance = deployment.instance

    def failed() -> bool:
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        return instance.status == Instance.Status.FAILED

    wait_until(failed, timeout=60, interval=0.3, what="the launch to fail")
    assert "FileNotFoundError: /weights/missing/config.json" in instance.status_reason_text
    assert deployment_status(deployment=deployment).code == "failed"
    # Never ran, so never billed: no GPU meter was opened and the balance is untouched.
    assert not Meter.objects.filter(ref__contains=str(instance.pk), sku__code__startswith="gpu").exists()
    assert balance_get(user=rich_alice) == before
    assert backend_has_nothing(local_apps[0], instance.key)


def backend_has_nothing(backend, key: str) -> bool:
    return key not in backend.runtime.instance_keys() and backend.runtime.ports.get(key) == {}


def test_an_app_this_host_cannot_run_is_refused_before_anything_is_reserved(local_apps, rich_alice):
    from apps_marketplace.models import ModelEntry

    llama = App.objects.get(slug="llama-3-instruct-chat")
    before = balance_get(user=rich_alice)
    with pytest.raises(LaunchInvalid) as refusal:
        deployment_create(
            user=rich_alice,
            app=llama,
            model=ModelEntry.objects.get(repo_id="meta-llama/Meta-Llama-3-8B-Instruct"),
            parameters={},
            gpu_model=GpuModel.objects.get(slug="h200"),
            gpu_count=1,
            region=Region.objects.get(slug="local"),
        )
    assert refusal.value.field == "region"
    assert "vllm is not installed on this host" in str(refusal.value)
    assert not Instance.objects.filter(owner=rich_alice).exists()
    assert balance_get(user=rich_alice) == before


def test_an_app_with_a_separate_webui_runs_both_and_the_webui_knows_the_servers_port(local_apps, rich_alice, charlie):
    backend, _tensorboard = local_apps
    chat = App.objects.create(
        slug="two-process-chat",
        name="Two-process chat",
        tagline="A server and a WebUI in front of it",
        description="As Open WebUI in front of vLLM.",
        category="chat",
        engine="test",
        image="example/server:1",
        image_size_bytes=1,
        command_template="python3 -m http.server {port} --bind {host}",
        port=8000,
        webui_image="example/webui:1",
        webui_command_template="env BACKEND_URL=http://127.0.0.1:{port}/v1 python3 -m http.server {webui_port} --bind {host}",
        webui_port=8080,
        gpu_required=False,
    )
    deployment, key = _deploy_local(rich_alice, chat)
    instance = wait_running(deployment.instance)
    ports = backend.runtime.ports.get(instance.key)
    assert set(ports) == {"app", "webui"} and ports["app"] != ports["webui"]
    webui_process = next(
        p
        for p in backend.runtime.processes(instance.key)
        if "http.server" in " ".join(p.cmdline()) and str(ports["webui"]) in p.cmdline()
    )
    assert webui_process.environ()["BACKEND_URL"] == f"http://127.0.0.1:{ports['app']}/v1"

    endpoints = deployment_endpoints(deployment=deployment, host="testserver", scheme="http")
    assert endpoints["webui_url"] == f"/i/{instance.pk}/webui/"
    with asgi_server() as base_url:
        owner = session_cookie(rich_alice)
        assert httpx.get(f"{base_url}/i/{instance.pk}/webui/", cookies=owner, timeout=10).status_code == 200
        api = httpx.get(f"{base_url}/i/{instance.pk}/app/", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert api.status_code == 200
        # The key is for the API; the WebUI is the owner's, in the browser.
        refused = [
            httpx.get(f"{base_url}/i/{instance.pk}/webui/", headers={"Authorization": f"Bearer {key}"}, timeout=10),
            httpx.get(f"{base_url}/i/{instance.pk}/webui/", cookies=session_cookie(charlie), timeout=10),
        ]
        assert [r.status_code for r in refused] == [404, 404]
