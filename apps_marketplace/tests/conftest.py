import pytest

from apps_marketplace.loaders import marketplace_catalogue_load
from instances.catalogue import catalogue_seed
from instances.tests.conftest import this_host  # noqa: F401 (a real backend)
from providers.slurm.tests.cluster_fixtures import on_slurm, slurm_cluster, slurm_tmp_path  # noqa: F401 (a real backend)


@pytest.fixture
def catalogue(db):
    """The shipped GPU and marketplace catalogues, as `make run` seeds them."""
    catalogue_seed()
    return marketplace_catalogue_load()


@pytest.fixture
def fleet(settings, catalogue):
    """The simulated cloud with the instances tests' small fleet (A800s and H800s in cn-north-1)."""
    from instances.tests.conftest import backends

    settings.PROVISIONING_BACKENDS = backends()
    settings.INSTANCES_REDRIVE_AFTER_S = 0
    return catalogue


@pytest.fixture
def rich_alice(alice, fleet):
    from instances.tests.conftest import fund

    fund(alice, 1_000_000)
    return alice


def deploy(
    user,
    *,
    app="llama-3-instruct-chat",
    model="meta-llama/Meta-Llama-3-8B-Instruct",
    gpu="a800-80g",
    count=1,
    **parameters,
):
    """Deploy through the service, with the (eager) worker run on commit."""
    from apps_marketplace.models import App, ModelEntry
    from apps_marketplace.services import deployment_create
    from instances.models import GpuModel, Region
    from instances.tests.conftest import committed

    with committed():
        deployment, key = deployment_create(
            user=user,
            app=App.objects.get(slug=app),
            model=ModelEntry.objects.get(repo_id=model),
            parameters=parameters,
            gpu_model=GpuModel.objects.get(slug=gpu),
            gpu_count=count,
            region=Region.objects.get(slug="cn-north-1"),
        )
    deployment.instance.refresh_from_db()
    return deployment, key
