"""List pages and endpoints take the same number of queries for 5 rows as for 25, detail pages a fixed
few, and none of them asks the provider (``provider_guard``): what they show was saved by the worker."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts.models import SSHKey
from instances.models import GpuModel, Image, Instance, Region
from instances.tests.conftest import SMALL_FLEET
from instances.tests.provider_guard import guarded_backends, provider_forbidden


@pytest.fixture(autouse=True)
def guarded(settings):
    settings.PROVISIONING_BACKENDS = guarded_backends(SMALL_FLEET)


def _make(user, n) -> list[Instance]:
    region, gpu, image = Region.objects.first(), GpuModel.objects.first(), Image.objects.first()
    key = SSHKey.objects.create(
        user=user,
        name=f"k{uuid.uuid4().hex[:6]}",
        public_key="ssh-ed25519 AAAA",
        key_type="ssh-ed25519",
        bits=256,
        fingerprint=f"SHA256:{uuid.uuid4().hex}",
    )
    now = timezone.now()
    made = []
    for i in range(n):
        instance = Instance.objects.create(
            owner=user,
            name=f"i{i}",
            region=region,
            gpu_model=gpu,
            gpu_count=1,
            image=image,
            disk_gb=50,
            backend_alias="default",
            hourly_price_fen=100,
            status="running",
            running_since=now,
            # As the worker saved them when it booted: every row shows a way in.
            entry_points={"web": ["lab", "code", "app"], "ssh_port": 2222, "ssh_user": "console"},
            entry_points_at=now,
        )
        instance.ssh_keys.add(key)
        made.append(instance)
    return made


def _deploy(user, instances: list[Instance]) -> None:
    from apps_marketplace.loaders import marketplace_catalogue_load
    from apps_marketplace.models import App, Deployment

    if not App.objects.exists():
        marketplace_catalogue_load()
    app = App.objects.filter(is_active=True).first()
    for instance in instances:
        Deployment.objects.create(
            owner=user,
            app=app,
            model=app.default_model,
            instance=instance,
            api_key_hash=uuid.uuid4().hex,
            api_key_prefix="dk-test",
        )


def _queries(client, url):
    with provider_forbidden() as calls, CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    assert calls == []
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url_name", ["instances", "api-instance-list"])
def test_the_query_count_does_not_grow_with_the_page(alice, alice_client, catalogue, url_name):
    url = reverse(url_name) + ("?page_size=100" if url_name.startswith("api") else "")
    _make(alice, 5)
    few = _queries(alice_client, url)
    _make(alice, 20)
    many = _queries(alice_client, url)
    assert many == few
    assert few <= 8


@pytest.mark.parametrize("url_name", ["deployments", "api-deployments-list"])
def test_a_list_of_deployments_takes_as_many_queries_for_25_as_for_5(alice, alice_client, catalogue, url_name):
    url = reverse(url_name)
    _deploy(alice, _make(alice, 5))
    few = _queries(alice_client, url)
    _deploy(alice, _make(alice, 20))
    many = _queries(alice_client, url)
    assert many == few
    assert few <= 6


@pytest.mark.parametrize(("page", "budget"), [("/instances/{pk}/", 15), ("/api/v1/instances/{pk}/", 5)])
def test_an_instance_page_takes_a_fixed_few_queries(alice, alice_client, catalogue, page, budget):
    # The page: the session, the user, the instance, its events, volumes, keys, cap, owed and balance,
    # the owner's secrets with the instance's choice (one, since secrets: was 11), the images saved from
    # it (one), its snapshots and its snapshot schedule (two, since snapshots: was 13); the header: the
    # teams switcher's memberships and the bell's unread count.
    (instance,) = _make(alice, 1)
    assert _queries(alice_client, page.format(pk=instance.pk)) <= budget


def test_a_launch_takes_a_fixed_few_queries_in_the_request_and_in_the_worker(rich_alice, alice_client):
    from instances.services import instance_provision, nodes_sync

    nodes_sync(alias="default")
    body = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124"}
    warm = alice_client.post(reverse("api-instance-list"), {**body, "name": "warm"}, content_type="application/json")
    instance_provision(instance_id=warm.json()["id"])  # the first boot prices the GPU model in billing
    with provider_forbidden() as calls, CaptureQueriesContext(connection) as request:
        response = alice_client.post(reverse("api-instance-list"), body, content_type="application/json")
    assert response.status_code == 201 and calls == []
    with CaptureQueriesContext(connection) as worker:
        assert instance_provision(instance_id=response.json()["id"]) is False  # running: no poll to come
    assert Instance.objects.get(pk=response.json()["id"]).status == "running"
    # Was 19 and 22. The request: the session and its user, the three catalogue choices, whether the
    # region's nodes are known, the quota (its lock, then grant and usage), the funds, the spending guard
    # (a hard-capped budget: instances.hooks.spend_guard), the cards, the instance and its events, and a
    # savepoint around them. The worker: the instance and its boot spec
    # (keys, volumes), whether it is a clone (its disk's snapshot: one, since snapshots: was 17), the
    # simulated cloud's machine, the state, the poll, and the move to RUNNING with its event, price and meter.
    assert len(request) <= 15
    assert len(worker) <= 18
