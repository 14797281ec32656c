"""Nobody can empty the WeChat Pay platform-certificate cache with a notification (issue #24).

A notification naming a certificate serial the console does not hold is refused as it is: no
download from WeChat Pay, no change to the certificates held. New platform certificates come from a
scheduled task; public-key mode needs no certificates at all.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from django.conf import settings as django_settings
from django.test import Client

from billing.models import TopUpOrder
from billing.selectors import balance_get
from billing.tests.conftest import real_gateways  # noqa: F401 (a fixture)
from billing.tests.test_wechatpay_gateway import order  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def notify(body: bytes, headers: dict):
    return Client().post("/billing/webhooks/wechatpay/", data=body, content_type="application/json", headers=headers)


def certificate_downloads(fake) -> int:
    return sum(1 for method, path, _ in fake.calls if (method, path) == ("GET", "/v3/certificates"))


def test_an_unknown_serial_is_refused_without_asking_wechat_pay_or_dropping_the_certificates(
    real_gateways,  # noqa: F811
    order,  # noqa: F811
    alice,
):
    wechat = real_gateways.wechat
    wechat.certificates_down = True  # were the console to ask now, it would be left with nothing
    no = f"topup_{order.pk}"
    wechat.pay(no)
    for serial in ("DEADBEEF", "0123456789ABCDEF0123456789ABCDEF01234567"):
        forged = wechat.notification(wechat.transaction(no), serial=serial)
        assert notify(*forged).status_code == 401
    assert certificate_downloads(wechat) == 0
    # The genuine notification still verifies with the certificate the console holds.
    assert notify(*wechat.notification(wechat.transaction(no))).status_code == 200
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and balance_get(user=alice).cash == 5000


def test_a_notification_signed_with_a_newer_certificate_waits_for_the_scheduled_refresh(
    real_gateways,  # noqa: F811
    order,  # noqa: F811
    alice,
):
    from billing.payments import gateway_certificates_refresh  # what beat runs (here: the test names it first)

    wechat = real_gateways.wechat
    no = f"topup_{order.pk}"
    wechat.pay(no)
    wechat.rotate()  # WeChat Pay signs with a certificate the console has not fetched yet
    paid = wechat.notification(wechat.transaction(no))
    assert notify(*paid).status_code == 401
    assert certificate_downloads(wechat) == 0

    assert gateway_certificates_refresh() == 1  # what beat runs
    assert gateway_certificates_refresh() == 0  # held already: nothing new
    assert notify(*paid).status_code == 200  # WeChat Pay delivers it again, as it does until acknowledged
    assert balance_get(user=alice).cash == 5000


def test_the_refresh_is_scheduled():
    tasks = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert "billing.tasks.gateway_certificates_refresh_task" in tasks


def test_public_key_mode_verifies_with_the_configured_key(real_gateways, order, alice, settings, tmp_path):  # noqa: F811
    wechat = real_gateways.wechat
    key_file = tmp_path / "wechatpay-public.pem"
    key_file.write_bytes(
        wechat.platform_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    settings.WECHATPAY_PUBLIC_KEY_FILE = str(key_file)
    settings.WECHATPAY_PUBLIC_KEY_ID = "PUB_KEY_ID_0114232134912410000000000001"
    settings.WECHATPAY_PLATFORM_CERT_DIR = ""
    no = f"topup_{order.pk}"
    wechat.pay(no)
    paid = wechat.notification(wechat.transaction(no), serial=settings.WECHATPAY_PUBLIC_KEY_ID)
    assert notify(*paid).status_code == 200
    assert certificate_downloads(wechat) == 0
    assert balance_get(user=alice).cash == 5000
