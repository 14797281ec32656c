"""The Aliyun and Tencent Cloud SMS senders, their official SDKs whole, against recorded answers on loopback."""

from __future__ import annotations

import json
import socket
from urllib.parse import parse_qs

import pytest

from identity.sms.aliyun import AliyunSender
from identity.sms.base import SmsBadNumber, SmsError, SmsThrottled
from identity.sms.tencent import TencentSender
from identity.tests.recorded import recorded_server, recording

NUMBER = "+8613800138000"


def aliyun(server_port: int) -> AliyunSender:
    return AliyunSender(
        ACCESS_KEY_ID="LTAI-test",
        ACCESS_KEY_SECRET="secret",
        SIGN_NAME="GPU Console",
        TEMPLATE_CODE="SMS_000001",
        ENDPOINT=f"127.0.0.1:{server_port}",
        PROTOCOL="http",
        TIMEOUT_MS=5000,
    )


def tencent(server_port: int) -> TencentSender:
    return TencentSender(
        SECRET_ID="AKID-test",
        SECRET_KEY="secret",
        SDK_APP_ID="1400000000",
        SIGN_NAME="GPU Console",
        TEMPLATE_ID="100001",
        ENDPOINT=f"127.0.0.1:{server_port}",
        SCHEME="http",
        TIMEOUT_S=2,
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_aliyun_sends_the_code_in_the_template_and_returns_the_biz_id():
    with recorded_server(recording("aliyun_sms_ok")) as server:
        sent = aliyun(server.server_port).send_code(number=NUMBER, code="123456", purpose="login", ttl_minutes=5)
    assert sent.reference == "900619746936498440^0"
    (request,) = server.requests
    query = parse_qs(request["path"].split("?", 1)[1]) if "?" in request["path"] else {}
    query |= parse_qs(request["body"].decode())
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["x-acs-action"] == "SendSms"
    assert headers["authorization"].startswith("ACS3-HMAC-SHA256")  # the SDK signed it
    assert query["PhoneNumbers"] == ["13800138000"]  # domestic: without +86
    assert json.loads(query["TemplateParam"][0]) == {"code": "123456"}
    assert query["SignName"] == ["GPU Console"] and query["TemplateCode"] == ["SMS_000001"]


@pytest.mark.parametrize(
    ("answer", "error"),
    [("aliyun_sms_throttled", SmsThrottled), ("aliyun_sms_bad_number", SmsBadNumber), ("aliyun_sms_down", SmsError)],
)
def test_aliyun_refusals_say_whose_they_are(answer, error):
    with recorded_server(recording(answer)) as server, pytest.raises(error) as raised:
        aliyun(server.server_port).send_code(number=NUMBER, code="123456", purpose="login", ttl_minutes=5)
    assert raised.type is error
    assert raised.value.transient is (error is not SmsBadNumber)


def test_aliyun_unreachable_is_transient():
    with pytest.raises(SmsError) as raised:
        aliyun(closed_port()).send_code(number=NUMBER, code="123456", purpose="login", ttl_minutes=5)
    assert raised.type is SmsError and raised.value.transient


def test_tencent_sends_the_code_and_its_lifetime_and_returns_the_serial_number():
    with recorded_server(recording("tencent_sms_ok")) as server:
        sent = tencent(server.server_port).send_code(number=NUMBER, code="654321", purpose="add", ttl_minutes=5)
    assert sent.reference == "5000:1045710669157053657849499619"
    (request,) = server.requests
    body = json.loads(request["body"])
    assert body["PhoneNumberSet"] == [NUMBER]
    assert body["TemplateParamSet"] == ["654321", "5"]
    assert body["SmsSdkAppId"] == "1400000000" and body["TemplateId"] == "100001"
    assert request["headers"]["X-TC-Action"] == "SendSms"
    assert request["headers"]["Authorization"].startswith("TC3-HMAC-SHA256")


@pytest.mark.parametrize(
    ("answer", "error"),
    [("tencent_sms_throttled", SmsThrottled), ("tencent_sms_bad_number", SmsBadNumber), ("tencent_sms_down", SmsError)],
)
def test_tencent_refusals_say_whose_they_are(answer, error):
    with recorded_server(recording(answer)) as server, pytest.raises(error) as raised:
        tencent(server.server_port).send_code(number=NUMBER, code="654321", purpose="login", ttl_minutes=5)
    assert raised.type is error


def test_tencent_unreachable_is_transient():
    with pytest.raises(SmsError) as raised:
        tencent(closed_port()).send_code(number=NUMBER, code="654321", purpose="login", ttl_minutes=5)
    assert raised.type is SmsError and raised.value.transient
