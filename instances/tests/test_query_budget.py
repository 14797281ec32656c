"""The list page and endpoint take the same number of queries for 5 instances as for 50."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import SSHKey
from instances.models import GpuModel, Image, Instance, Region


def _make(user, n):
    region, gpu, image = Region.objects.first(), GpuModel.objects.first(), Image.objects.first()
    key = SSHKey.objects.create(
        user=user,
        name=f"k{n}",
        public_key="ssh-ed25519 AAAA",
        key_type="ssh-ed25519",
        bits=256,
        fingerprint=f"SHA256:{n}",
    )
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
        )
        instance.ssh_keys.add(key)


def _queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url_name", ["instances", "api-instance-list"])
def test_the_query_count_does_not_grow_with_the_page(alice, alice_client, catalogue, url_name):
    url = reverse(url_name) + ("?page_size=100" if url_name.startswith("api") else "")
    _make(alice, 5)
    few = _queries(alice_client, url)
    _make(alice, 20)
    many = _queries(alice_client, url)
    assert many == few
    assert few <= 12
