"""Tencent Cloud's ID check (faceid IdCardVerification), its SDK whole, against recorded answers on loopback."""

from __future__ import annotations

import json

import pytest

from identity.realname.base import RealNameProviderUnavailable
from identity.realname.tencent import TencentIdCardProvider
from identity.tests.recorded import recorded_server, recording

ID = "440308199003071235"


def provider(port: int) -> TencentIdCardProvider:
    return TencentIdCardProvider(
        SECRET_ID="AKID-test", SECRET_KEY="secret", ENDPOINT=f"127.0.0.1:{port}", SCHEME="http", TIMEOUT_S=2
    )


def test_a_match_is_verified_with_the_request_id():
    with recorded_server(recording("tencent_idcard_match")) as server:
        verdict = provider(server.server_port).verify(name="张小三", id_number=ID)
    assert verdict.matched and verdict.reference == "e1e2e3e4-3333-4d4d-9e9e-4567890abcde"
    (request,) = server.requests
    assert json.loads(request["body"]) == {"IdCard": ID, "Name": "张小三"}
    assert request["headers"]["X-TC-Action"] == "IdCardVerification"


def test_a_mismatch_is_a_no():
    with recorded_server(recording("tencent_idcard_mismatch")) as server:
        verdict = provider(server.server_port).verify(name="张小三", id_number=ID)
    assert not verdict.matched and verdict.reason == "mismatch"


@pytest.mark.parametrize("answer", ["tencent_idcard_records_down", "tencent_sms_down"])
def test_no_verdict_is_unavailable(answer):
    with recorded_server(recording(answer)) as server, pytest.raises(RealNameProviderUnavailable):
        provider(server.server_port).verify(name="张小三", id_number=ID)
