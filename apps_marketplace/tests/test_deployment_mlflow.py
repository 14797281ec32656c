"""MLflow as a real app on the local backend: the marketplace deploys the tracking server in its own image
(images/mlflow, built by `make images`) with its run database and artifacts on a volume. A run logged
with the MLflow client from the instance is read back through the console's proxy with the
deployment's key (parameters, metric history, the artifact, the UI's page), nobody else gets in, and
the run and its artifact are still there after a redeploy."""

from __future__ import annotations

import json
import textwrap

import httpx
import pytest

from apps_marketplace.models import App
from apps_marketplace.proxy_targets import deployment_proxy_target
from apps_marketplace.services import deployment_create, deployment_redeploy
from apps_marketplace.tests.app_images import BOOT_S, MLFLOW, app_image_or_skip, exec_as_user, in_app_containers
from console.hooks import proxy_target
from console.tests.conftest import session_cookie
from instances.models import GpuModel, Region
from instances.tests.conftest import committed
from providers.local.tests.local_helpers import asgi_server, wait_running
from storage.tests.conftest import make_volume

pytestmark = [
    pytest.mark.local,
    pytest.mark.containers,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(900),  # two starts of the server on a busy 2-core CI host
]

LOG_A_RUN = textwrap.dedent(
    """
    import json, os, tempfile
    import mlflow
    mlflow.set_tracking_uri("http://127.0.0.1:5000")
    mlflow.set_experiment("llm-finetune")
    with mlflow.start_run(run_name="baseline") as run:
        mlflow.log_param("learning_rate", "0.0003")
        for step, loss in enumerate([2.5, 1.75, 1.25]):
            mlflow.log_metric("loss", loss, step=step)
        folder = tempfile.mkdtemp()
        with open(os.path.join(folder, "notes.txt"), "w") as handle:
            handle.write("kept across redeploys")
        mlflow.log_artifact(os.path.join(folder, "notes.txt"))
    print(json.dumps({"run_id": run.info.run_id}))
    """
)


@pytest.fixture
def mlflow_host(this_host, settings, rich_alice, hooks_override):
    app_image_or_skip("mlflow")
    backend = in_app_containers(this_host)
    hooks_override(proxy_target, deployment_proxy_target)
    return backend


def test_a_run_logged_from_the_instance_is_read_through_the_proxy_and_survives_a_redeploy(
    mlflow_host, rich_alice, charlie
):
    backend = mlflow_host
    mlflow = App.objects.get(slug="mlflow")
    assert mlflow.runs_on == "cpu" and mlflow.cpu_image == "mlflow-server"
    volume = make_volume(rich_alice, region="local", size_gb=10, name="mlruns")
    with committed():
        deployment, key = deployment_create(
            user=rich_alice,
            app=mlflow,
            model=None,
            parameters={"store_dir": "/mnt/mlruns"},
            gpu_model=GpuModel.objects.get(slug="h200"),
            gpu_count=1,
            region=Region.objects.get(slug="local"),
            volumes=[(volume, "/mnt/mlruns", "rw")],
        )
    instance = wait_running(deployment.instance, timeout=BOOT_S)
    assert backend.runtime.meta(instance.key)["image"] == MLFLOW  # the app's own image, not the CUDA base

    logged = exec_as_user(backend, instance.key, "/opt/venv/bin/python", "-c", LOG_A_RUN)
    assert logged.returncode == 0, logged.stderr[-2000:]
    run_id = json.loads(logged.stdout.strip().splitlines()[-1])["run_id"]
    bearer = {"Authorization": f"Bearer {key}"}

    def read_back(app: str) -> None:
        run = httpx.get(f"{app}api/2.0/mlflow/runs/get", params={"run_id": run_id}, headers=bearer, timeout=30)
        assert run.status_code == 200, run.text[:300]
        data = run.json()["run"]["data"]
        assert {p["key"]: p["value"] for p in data["params"]} == {"learning_rate": "0.0003"}
        history = httpx.get(
            f"{app}api/2.0/mlflow/metrics/get-history",
            params={"run_id": run_id, "metric_key": "loss"},
            headers=bearer,
            timeout=30,
        )
        assert [m["value"] for m in history.json()["metrics"]] == [2.5, 1.75, 1.25]
        artifact = httpx.get(
            f"{app}get-artifact", params={"path": "notes.txt", "run_uuid": run_id}, headers=bearer, timeout=30
        )
        assert artifact.status_code == 200 and artifact.text == "kept across redeploys"

    with asgi_server() as base_url:
        app = f"{base_url}/i/{instance.pk}/app/"
        read_back(app)
        # The UI's page for the owner's browser session, and its own API the page calls (relative paths).
        page = httpx.get(app, cookies=session_cookie(rich_alice), timeout=30)
        assert page.status_code == 200 and "<title>MLflow</title>" in page.text
        search = httpx.post(
            f"{app}ajax-api/2.0/mlflow/runs/search",
            json={"experiment_ids": [], "filter": f"attributes.run_id = '{run_id}'"},
            cookies=session_cookie(rich_alice),
            timeout=30,
        )
        assert search.status_code in (200, 400), search.text[:300]  # reached MLflow itself, not refused
        refused = [
            httpx.get(f"{app}api/2.0/mlflow/runs/get", params={"run_id": run_id}, timeout=30),
            httpx.get(app, cookies=session_cookie(charlie), timeout=30),
            httpx.get(app, headers={"Authorization": "Bearer dk-not-the-key"}, timeout=30),
        ]
        assert [r.status_code for r in refused] == [404, 404, 404]

        # The run database and the artifacts are on the volume: a redeploy (a new start of the server)
        # finds them.
        with committed():
            deployment_redeploy(deployment=deployment, model=None, parameters={"store_dir": "/mnt/mlruns"})
        wait_running(instance, timeout=BOOT_S)
        read_back(app)
