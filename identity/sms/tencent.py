"""Tencent Cloud SMS (短信, API 2021-01-11) through its official SDK.

OPTIONS: ``SECRET_ID``, ``SECRET_KEY``, ``SDK_APP_ID``, ``SIGN_NAME``, ``TEMPLATE_ID`` (a template whose
parameters are the code and its lifetime in minutes), ``REGION`` (``ap-guangzhou``) and ``ENDPOINT``
(``sms.tencentcloudapi.com``; the tests point it at a loopback server with recorded bodies, ``SCHEME``
``http``). A request error (``TencentCloudSDKException``) or no answer is the service's; each text's
``SendStatus.Code`` decides otherwise: ``Ok`` is sent, ``LimitExceeded.*`` throttles, a number the
service calls incorrect is the person's to fix.
"""

from __future__ import annotations

import logging

from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile
from tencentcloud.sms.v20210111 import models, sms_client

from identity.sms.base import SentText, SmsBadNumber, SmsError, SmsSender, SmsThrottled

logger = logging.getLogger(__name__)

_BAD_NUMBER = {
    "InvalidParameterValue.IncorrectPhoneNumber",
    "UnsupportedOperation.ContainDomesticAndInternationalPhoneNumber",
}


class TencentSender(SmsSender):
    label = "Tencent Cloud SMS"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        http = HttpProfile(
            protocol=options.get("SCHEME", "https"),
            endpoint=options.get("ENDPOINT", "sms.tencentcloudapi.com"),
            reqTimeout=int(options.get("TIMEOUT_S", 5)),
        )
        self._client = sms_client.SmsClient(
            credential.Credential(options["SECRET_ID"], options["SECRET_KEY"]),
            options.get("REGION", "ap-guangzhou"),
            ClientProfile(httpProfile=http),
        )

    def send_code(self, *, number: str, code: str, purpose: str, ttl_minutes: int) -> SentText:
        request = models.SendSmsRequest()
        request.PhoneNumberSet = [number]
        request.SmsSdkAppId = str(self.options["SDK_APP_ID"])
        request.SignName = self.options["SIGN_NAME"]
        request.TemplateId = str(self.options["TEMPLATE_ID"])
        request.TemplateParamSet = [code, str(ttl_minutes)]
        try:
            answer = self._client.SendSms(request)
        except TencentCloudSDKException as exc:
            logger.warning("Tencent Cloud SMS refused the request: %s %s", exc.code, exc.message)
            if (exc.code or "").startswith("RequestLimitExceeded") or (exc.code or "").startswith("LimitExceeded"):
                raise SmsThrottled(exc.code) from exc
            raise SmsError(exc.code or str(exc)) from exc
        except Exception as exc:  # the transport's errors (refused, timed out)
            logger.warning("Tencent Cloud SMS did not answer: %s", exc)
            raise SmsError(f"Tencent Cloud SMS: {exc}") from exc
        status = (answer.SendStatusSet or [None])[0]
        if status is None:
            raise SmsError("no send status")
        if status.Code == "Ok":
            return SentText(reference=status.SerialNo or answer.RequestId or "")
        logger.warning(
            "Tencent Cloud SMS refused a text: %s %s (request %s)", status.Code, status.Message, answer.RequestId
        )
        if status.Code in _BAD_NUMBER:
            raise SmsBadNumber(status.Code)
        if status.Code.startswith("LimitExceeded"):
            raise SmsThrottled(status.Code)
        raise SmsError(status.Code)
