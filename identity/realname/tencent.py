"""Tencent Cloud's 身份证二要素核验 (faceid ``IdCardVerification``, API 2018-03-01), official SDK.

OPTIONS: ``SECRET_ID``, ``SECRET_KEY``, ``REGION`` (``ap-guangzhou``), ``ENDPOINT``
(``faceid.tencentcloudapi.com``; tests: a loopback server with recorded bodies and ``SCHEME`` ``http``).
``Result`` codes (Tencent's documentation): 0 matched; -1 name and number differ; -2 invalid number;
-3 invalid name; -5 no such number: all four a verdict of "no". -4 (records service down), -6
(authority upgrading), -7 (daily limit) and any request error mean no verdict now: unavailable.
"""

from __future__ import annotations

import logging

from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile
from tencentcloud.faceid.v20180301 import faceid_client, models

from identity.realname.base import RealNameProvider, RealNameProviderUnavailable, RealNameVerdict

logger = logging.getLogger(__name__)

_NO = {"-1": "mismatch", "-2": "invalid", "-3": "invalid", "-5": "unknown"}


class TencentIdCardProvider(RealNameProvider):
    name = "tencent"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        http = HttpProfile(
            protocol=options.get("SCHEME", "https"),
            endpoint=options.get("ENDPOINT", "faceid.tencentcloudapi.com"),
            reqTimeout=int(options.get("TIMEOUT_S", 10)),
        )
        self._client = faceid_client.FaceidClient(
            credential.Credential(options["SECRET_ID"], options["SECRET_KEY"]),
            options.get("REGION", "ap-guangzhou"),
            ClientProfile(httpProfile=http),
        )

    def verify(self, *, name: str, id_number: str) -> RealNameVerdict:
        request = models.IdCardVerificationRequest()
        request.IdCard = id_number
        request.Name = name
        try:
            answer = self._client.IdCardVerification(request)
        except TencentCloudSDKException as exc:
            logger.warning("Tencent real-name check refused the request: %s %s", exc.code, exc.message)
            raise RealNameProviderUnavailable(exc.code or str(exc)) from exc
        except Exception as exc:
            logger.warning("Tencent real-name check did not answer: %s", exc)
            raise RealNameProviderUnavailable(str(exc)) from exc
        if answer.Result == "0":
            return RealNameVerdict(matched=True, reference=answer.RequestId or "")
        if answer.Result in _NO:
            return RealNameVerdict(matched=False, reference=answer.RequestId or "", reason=_NO[answer.Result])
        logger.warning("Tencent real-name check gave no verdict: %s %s", answer.Result, answer.Description)
        raise RealNameProviderUnavailable(f"result {answer.Result}")
