"""``check --deploy`` names every enabled gateway that lacks a key, and never a key's value."""

import pytest
from django.test import override_settings

from billing.checks import gateway_keys_check
from billing.gateways import _load, gateway_get, gateways_enabled

WECHATPAY = "billing.gateways.wechatpay.WeChatPayGateway"
STRIPE = "billing.gateways.stripe_checkout.StripeGateway"


@override_settings(
    BILLING_EXTRA_PAYMENT_GATEWAYS=[WECHATPAY, STRIPE], STRIPE_SECRET_KEY="sk_live_secret", STRIPE_WEBHOOK_SECRET=""
)
def test_an_enabled_gateway_without_its_keys_is_warned_about():
    _load.cache_clear()
    warnings = {w.obj: w for w in gateway_keys_check()}
    assert set(warnings) == {"wechatpay", "stripe"}  # the simulated gateway needs no keys
    assert "STRIPE_WEBHOOK_SECRET" in warnings["stripe"].msg and "sk_live_secret" not in warnings["stripe"].msg
    assert "WECHATPAY_APIV3_KEY" in warnings["wechatpay"].msg
    assert {w.id for w in warnings.values()} == {"billing.W001"}


@override_settings(
    BILLING_EXTRA_PAYMENT_GATEWAYS=[STRIPE, STRIPE], STRIPE_SECRET_KEY="sk", STRIPE_WEBHOOK_SECRET="whsec"
)
def test_gateways_are_found_by_name_each_once_and_the_default_first():
    assert [g.name for g in gateways_enabled()] == ["simulated", "stripe"]
    assert gateway_get("stripe").name == "stripe" and gateway_get().name == "simulated"
    assert gateway_keys_check() == []


def test_a_name_not_enabled_is_not_found():
    with pytest.raises(LookupError):
        gateway_get("stripe")
