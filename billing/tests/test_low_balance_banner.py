"""The low-balance banner: on every page while something runs and the runway is short; cheap."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from billing.services import meter_start, sku_upsert
from billing.tests.gateway_helpers import paid_order

BANNER = "banner-low-balance"


@pytest.fixture
def gpu(db):
    return sku_upsert(code="gpu-h100", name="H100", unit="card-hour", price_fen=1000, unit_seconds=3600)


def test_it_warns_when_the_runway_is_short(alice, alice_client, gpu):
    paid_order(alice, 500)  # ¥5 at ¥10/h: 30 minutes
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-low", at=timezone.now())
    for url in ("/dashboard/", "/billing/", "/billing/statements/"):
        page = alice_client.get(url).content.decode()
        assert BANNER in page, url
        assert "30 min" in page or "29 min" in page
        assert 'href="/billing/#top-up"' in page


def test_it_is_quiet_with_enough_money(alice, alice_client, gpu):
    paid_order(alice, 5000)  # five hours
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-ok", at=timezone.now())
    assert BANNER not in alice_client.get("/dashboard/").content.decode()


def test_it_is_quiet_when_nothing_runs_even_at_zero(alice_client):
    assert BANNER not in alice_client.get("/dashboard/").content.decode()


@override_settings(BILLING_LOW_BALANCE_WARNING_S=6 * 3600)
def test_the_threshold_is_a_setting(alice, alice_client, gpu):
    paid_order(alice, 5000)
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-set", at=timezone.now())
    assert BANNER in alice_client.get("/dashboard/").content.decode()


def test_an_empty_wallet_says_it_ran_out(alice, alice_client, gpu):
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-zero", at=timezone.now())
    page = alice_client.get("/billing/transactions/").content.decode()
    assert BANNER in page and "run out" in page


def test_it_costs_one_query_and_nothing_for_visitors(alice, client, gpu):
    from django.test import RequestFactory

    from billing.context_processors import low_balance

    request = RequestFactory().get("/")
    request.user = alice
    with CaptureQueriesContext(connection) as queries:
        bool(low_balance(request)["low_balance"])
    assert len(queries) == 1  # the balance and the open meters together (runway_get)

    from django.contrib.auth.models import AnonymousUser

    request.user = AnonymousUser()
    with CaptureQueriesContext(connection) as queries:
        assert low_balance(request) == {}
    assert len(queries) == 0
