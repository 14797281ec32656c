"""Fixtures for the real gateways' tests: a fake Alipay, WeChat Pay and Stripe behind the transports."""

from __future__ import annotations

import pytest
import requests

from billing.gateways import _load
from billing.tests.fake_gateways import FakeAlipay, FakeStripe, FakeWeChatPay

ALIPAY = "billing.gateways.alipay.AlipayGateway"
ALIPAY_QR = "billing.gateways.alipay.AlipayQRGateway"
WECHATPAY = "billing.gateways.wechatpay.WeChatPayGateway"
STRIPE = "billing.gateways.stripe_checkout.StripeGateway"


@pytest.fixture
def real_gateways(settings, tmp_path, monkeypatch):
    """Every real adapter enabled beside the simulated one, each talking to its fake; returns the fakes.

    Gateway instances (and the SDK clients they hold) are cached per dotted path: the cache is
    emptied around each test so each test's keys are the ones used.
    """
    alipay, wechat, stripe_api = FakeAlipay(), FakeWeChatPay(), FakeStripe()
    settings.BILLING_EXTRA_PAYMENT_GATEWAYS = [ALIPAY, ALIPAY_QR, WECHATPAY, STRIPE]
    settings.BILLING_NOTIFY_BASE_URL = "https://console.example.com"
    for name, value in {**alipay.settings(tmp_path), **wechat.settings(tmp_path), **stripe_api.settings()}.items():
        setattr(settings, name, value)
    monkeypatch.setattr("alipay.urlopen", alipay.urlopen)
    monkeypatch.setattr("billing.gateways.alipay.urlopen", alipay.download)  # the bill's download

    def send(adapter, request, **kwargs):
        host = requests.utils.urlparse(request.url).hostname
        if host == "api.mch.weixin.qq.com":
            return wechat.send(request)
        if host == "api.stripe.com":
            return stripe_api.send(request)
        raise requests.ConnectionError(f"no network in the tests ({host})")

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", send)
    _load.cache_clear()
    yield type("Fakes", (), {"alipay": alipay, "wechat": wechat, "stripe": stripe_api})
    _load.cache_clear()
