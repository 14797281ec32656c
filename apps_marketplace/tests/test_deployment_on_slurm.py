"""A deployment on the Slurm backend: the app's server runs inside the instance's Slurm job, on the node
and cards Slurm chose, and the console's proxy reaches it there with the deployment's key."""

from __future__ import annotations

import httpx
import pytest

from apps_marketplace.models import App
from apps_marketplace.proxy_targets import deployment_proxy_target
from apps_marketplace.services import deployment_create
from apps_marketplace.tests.test_deployment_local_app import _write_scalars
from console.hooks import proxy_target
from console.tests.conftest import session_cookie
from instances.models import GpuModel, Region
from instances.tests.conftest import committed
from providers.local.tests.local_helpers import asgi_server, wait_running

pytestmark = [pytest.mark.slurm, pytest.mark.local, pytest.mark.django_db(transaction=True)]


def test_tensorboard_runs_in_the_slurm_job_with_the_public_models_and_answers_its_key(
    on_slurm, rich_alice, charlie, settings, tmp_path, slurm_tmp_path, hooks_override
):
    public = slurm_tmp_path / "public-models"  # what the tenant's job reads: where it can pass through
    (public / "Qwen/Qwen2.5-0.5B").mkdir(parents=True)
    (public / "Qwen/Qwen2.5-0.5B/config.json").write_text("{}")
    backend = on_slurm(services=(), PUBLIC_MOUNTS={"/models": str(public)})
    hooks_override(proxy_target, deployment_proxy_target)
    from providers.local.runtime.supervisor import LocalRuntime

    runtime = LocalRuntime(root=tmp_path / "probe", services=())
    if runtime.app_missing({"name": "tensorboard", "argv": ["tensorboard"]}):
        pytest.skip("TensorBoard is not installed (make local-deps)")
    _write_scalars(slurm_tmp_path / "runs", "on-slurm", backend=type("B", (), {"runtime": runtime})())
    with committed():
        deployment, key = deployment_create(
            user=rich_alice,
            app=App.objects.get(slug="tensorboard"),
            model=None,
            parameters={"logdir": str(slurm_tmp_path / "runs")},
            gpu_model=GpuModel.objects.get(slug="h200"),
            gpu_count=1,
            region=Region.objects.get(slug="slurm-local"),
        )
    instance = wait_running(deployment.instance, timeout=90)
    assert instance.backend_state["job_id"]
    # The public models are read-only in the job's instance too, at the catalogue's path.
    home = backend._dir(instance.key) / "home"
    assert (home / "models/Qwen/Qwen2.5-0.5B/config.json").read_text() == "{}"

    with asgi_server() as base_url:
        app = f"{base_url}/i/{instance.pk}/app/"
        runs = httpx.get(f"{app}data/runs", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert runs.status_code == 200 and runs.json() == ["on-slurm"]
        assert httpx.get(app, cookies=session_cookie(rich_alice), timeout=10).status_code == 200
        assert httpx.get(app, cookies=session_cookie(charlie), timeout=10).status_code == 404
