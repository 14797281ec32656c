"""A deployment's page shows its instance's GPU charts, as the instance page does."""

from __future__ import annotations

from django.urls import reverse

from apps_marketplace.tests.conftest import deploy
from metrics.services import metrics_collect


def test_the_deployment_page_charts_its_instance_s_gpus(rich_alice, alice_client):
    deployment, _key = deploy(rich_alice)
    metrics_collect()
    html = alice_client.get(reverse("deployment_detail", args=[deployment.pk])).content.decode()
    assert 'id="gpu-metrics"' in html
    assert reverse("api-instance-metrics", args=[deployment.instance.pk]) in html
