"""A console that runs a demo part says so on every page, and one that runs none says nothing."""

from __future__ import annotations

import pytest
from django.test import override_settings

from console.tests.test_demo_parts_check import REAL_BACKENDS, REAL_GATEWAY, SIMULATED_CLOUD

BANNER = 'class="alert warning banner-demo"'
NO_MACHINES = "simulated cloud (no real machines)"
NO_MONEY = "simulated payments (no real money)"


@pytest.fixture
def pages(client, alice_client):
    """The landing page for a visitor, and alice's dashboard and billing page."""

    def get() -> list[str]:
        responses = [client.get("/"), alice_client.get("/dashboard/"), alice_client.get("/billing/")]
        assert [r.status_code for r in responses] == [200, 200, 200]
        return [r.content.decode() for r in responses]

    return get


def test_the_default_console_names_both_demo_parts_on_every_page(pages):
    for page in pages():
        assert page.count(BANNER) == 1
        assert NO_MACHINES in page and NO_MONEY in page


@override_settings(PROVISIONING_BACKENDS=SIMULATED_CLOUD, BILLING_PAYMENT_GATEWAY=REAL_GATEWAY)
def test_only_the_simulated_cloud_is_named_when_payments_are_real(pages):
    for page in pages():
        assert BANNER in page and NO_MACHINES in page and NO_MONEY not in page


@override_settings(PROVISIONING_BACKENDS=REAL_BACKENDS)
def test_only_simulated_payments_are_named_when_the_cloud_is_real(pages):
    for page in pages():
        assert BANNER in page and NO_MONEY in page and NO_MACHINES not in page


@override_settings(PROVISIONING_BACKENDS=REAL_BACKENDS, BILLING_PAYMENT_GATEWAY=REAL_GATEWAY, CONSOLE_DEMO_MODE=True)
def test_a_console_without_demo_parts_shows_no_banner(pages):
    for page in pages():
        assert BANNER not in page


def test_htmx_partials_do_not_carry_the_banner(alice_client):
    response = alice_client.get("/instances/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert BANNER not in response.content.decode()
