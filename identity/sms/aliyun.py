"""Aliyun SMS (短信服务, dysmsapi 2017-05-25) through its official SDK.

OPTIONS: ``ACCESS_KEY_ID``, ``ACCESS_KEY_SECRET``, ``SIGN_NAME`` (the approved 签名), ``TEMPLATE_CODE``
(an approved template with a ``${code}`` variable), and ``ENDPOINT`` (``dysmsapi.aliyuncs.com``;
the tests point it at a loopback server that answers with recorded bodies, ``PROTOCOL`` ``http``).
The answer's ``Code`` decides: ``OK`` is sent; a ``*LIMIT_CONTROL`` or ``*DAY_LIMIT*`` throttles; a
malformed or unreachable number is the person's to fix; anything else (or no answer) is the service's.
"""

from __future__ import annotations

import json
import logging

from alibabacloud_dysmsapi20170525.client import Client
from alibabacloud_dysmsapi20170525.models import SendSmsRequest
from alibabacloud_tea_openapi.models import Config
from darabonba.runtime import RuntimeOptions

from identity.sms.base import SentText, SmsBadNumber, SmsError, SmsSender, SmsThrottled

logger = logging.getLogger(__name__)

_BAD_NUMBER = {"isv.MOBILE_NUMBER_ILLEGAL", "isv.MOBILE_COUNT_OVER_LIMIT", "isv.BLACK_KEY_CONTROL_LIMIT"}


class AliyunSender(SmsSender):
    label = "Aliyun SMS"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        config = Config(
            access_key_id=options["ACCESS_KEY_ID"],
            access_key_secret=options["ACCESS_KEY_SECRET"],
            endpoint=options.get("ENDPOINT", "dysmsapi.aliyuncs.com"),
            protocol=options.get("PROTOCOL", "https"),
        )
        self._client = Client(config)
        self._timeout_ms = int(options.get("TIMEOUT_MS", 5000))

    def send_code(self, *, number: str, code: str, purpose: str, ttl_minutes: int) -> SentText:
        request = SendSmsRequest(
            phone_numbers=number.removeprefix("+86"),
            sign_name=self.options["SIGN_NAME"],
            template_code=self.options["TEMPLATE_CODE"],
            template_param=json.dumps({"code": code}),
        )
        runtime = RuntimeOptions(read_timeout=self._timeout_ms, connect_timeout=self._timeout_ms, autoretry=False)
        try:
            body = self._client.send_sms_with_options(request, runtime).body
        except Exception as exc:  # the SDK raises its own and the transport's errors alike
            logger.warning("Aliyun SMS did not answer: %s", exc)
            raise SmsError(f"Aliyun SMS: {exc}") from exc
        if body.code == "OK":
            return SentText(reference=body.biz_id or body.request_id or "")
        logger.warning("Aliyun SMS refused a text: %s %s (request %s)", body.code, body.message, body.request_id)
        if body.code in _BAD_NUMBER:
            raise SmsBadNumber(body.code)
        if "LIMIT" in (body.code or ""):
            raise SmsThrottled(body.code)
        raise SmsError(body.code or "no code")
