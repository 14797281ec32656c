"""Alipay (支付宝): 电脑网站支付 (page pay, a redirect) and 当面付 (precreate, a QR code the payer scans).

Every request and the asynchronous notification are signed RSA2 (SHA256withRSA); python-alipay-sdk
signs our requests with the app's private key and verifies Alipay's answers and notifications with
Alipay's public key (``AliPay.verify``: its own check, not a copy). Keys come from files named in
settings, never from the repository.

Alipay's notification is a form POST (``application/x-www-form-urlencoded``): ``notify_id``,
``trade_status``, ``out_trade_no``, ``total_amount`` (yuan, ``"50.00"``), ``app_id``, ``sign``…
It is retried (up to 8 times over 25 hours) until the answer's body is exactly ``success``.
"""

from __future__ import annotations

import csv
import io
import logging
import zipfile
from collections.abc import Mapping
from datetime import date
from functools import cached_property
from pathlib import Path
from urllib.error import URLError
from urllib.parse import parse_qsl
from urllib.request import urlopen

from alipay import AliPay
from alipay.exceptions import AliPayException, AliPayValidationError
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from billing.gateways.base import (
    GatewayError,
    PaymentGateway,
    PaymentQuery,
    SettledLine,
    WebhookEvent,
    WebhookRejected,
    fen_from_yuan_text,
    notify_url,
    order_id_from,
    out_trade_no,
    yuan_text_from_fen,
)

logger = logging.getLogger(__name__)

PAID = {"TRADE_SUCCESS", "TRADE_FINISHED"}
# Codes Alipay answers when a trade was never created (page pay before the payer logged in) or is
# already closed: for ``close`` both mean "done".
NOT_THERE = {"ACQ.TRADE_NOT_EXIST", "ACQ.TRADE_STATUS_ERROR"}


def _read(path: str) -> str:
    return Path(path).read_text() if path else ""


class AlipayGateway(PaymentGateway):
    """Alipay's page pay: the payer is redirected to Alipay's cashier and comes back to the order page."""

    name = "alipay"
    label = _("Alipay")

    @cached_property
    def client(self) -> AliPay:
        return AliPay(
            appid=settings.ALIPAY_APP_ID,
            app_notify_url=notify_url(self.name),
            app_private_key_string=_read(settings.ALIPAY_APP_PRIVATE_KEY_FILE),
            alipay_public_key_string=_read(settings.ALIPAY_PUBLIC_KEY_FILE),
            sign_type="RSA2",
            debug=settings.ALIPAY_SANDBOX,
        )

    def is_configured(self) -> list[str]:
        return [
            name
            for name in (
                "ALIPAY_APP_ID",
                "ALIPAY_APP_PRIVATE_KEY_FILE",
                "ALIPAY_PUBLIC_KEY_FILE",
                "BILLING_NOTIFY_BASE_URL",
            )
            if not getattr(settings, name, "")
        ]

    def _subject(self, order) -> str:
        return f"{settings.CONSOLE_SITE_NAME} top-up #{order.pk}"

    def _call(self, api, **kwargs) -> dict:
        """One server API call; the SDK verifies the answer's signature. Network trouble is transient."""
        try:
            return api(**kwargs)
        except AliPayValidationError as exc:
            raise GatewayError("Alipay's answer did not verify") from exc
        except AliPayException as exc:
            raise GatewayError(f"Alipay refused: {exc}") from exc
        except (URLError, TimeoutError, OSError) as exc:
            raise GatewayError(f"Alipay is not reachable: {exc}", transient=True) from exc

    def create_checkout(self, *, order, return_url: str) -> str:
        query = self.client.api_alipay_trade_page_pay(
            subject=self._subject(order),
            out_trade_no=out_trade_no(order),
            total_amount=yuan_text_from_fen(order.amount_fen),
            return_url=return_url or None,
            notify_url=notify_url(self.name),
            timeout_express=f"{max(1, settings.BILLING_TOPUP_ORDER_TTL_S // 60)}m",
        )
        order.gateway_reference = out_trade_no(order)
        return f"{self.client._gateway}?{query}"

    def verify_webhook(self, *, body: bytes, headers: Mapping[str, str]) -> WebhookEvent:
        try:
            data = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True))
        except (UnicodeDecodeError, ValueError):
            raise WebhookRejected("malformed", "The notification is not a form.") from None
        signature = data.pop("sign", "")
        if not signature:
            raise WebhookRejected("signature_missing", "The notification is not signed.", status=401)
        try:
            valid = self.client.verify(dict(data), signature)
        except (AliPayException, ValueError, TypeError):
            valid = False
        if not valid:
            raise WebhookRejected("signature_invalid", "The notification's signature does not verify.", status=401)
        if data.get("app_id") != settings.ALIPAY_APP_ID:
            raise WebhookRejected("unknown_app", "The notification is for another Alipay app.", status=400)
        status = data.get("trade_status", "")
        if status in PAID:
            event_type = WebhookEvent.PAYMENT_SUCCEEDED
        elif status == "TRADE_CLOSED":
            event_type = WebhookEvent.PAYMENT_FAILED
        else:
            event_type = WebhookEvent.PAYMENT_PENDING
        notify_id = data.get("notify_id", "")
        if not notify_id:
            raise WebhookRejected("malformed", "The notification has no notify_id.")
        return WebhookEvent(
            # One payment can notify TRADE_SUCCESS then TRADE_FINISHED: the status is part of the id.
            id=f"{notify_id}:{status}"[:200],
            type=event_type,
            order_id=order_id_from(data.get("out_trade_no", "")),
            amount_fen=fen_from_yuan_text(data.get("total_amount", "")),
            currency="CNY",  # Alipay settles domestic trades in CNY only
            reference=data.get("trade_no", "")[:200],
            payload=data,
        )

    def webhook_ack(self) -> tuple[int, str, bytes]:
        return 200, "text/plain", b"success"

    def query(self, *, order) -> PaymentQuery:
        try:
            answer = self._call(self.client.api_alipay_trade_query, out_trade_no=out_trade_no(order))
        except GatewayError as exc:
            if "ACQ.TRADE_NOT_EXIST" in str(exc):
                return PaymentQuery(state=PaymentQuery.CLOSED)
            raise
        if answer.get("code") != "10000":
            if answer.get("sub_code") == "ACQ.TRADE_NOT_EXIST":
                return PaymentQuery(state=PaymentQuery.CLOSED)
            raise GatewayError(f"Alipay could not say: {answer.get('sub_code') or answer.get('msg')}", transient=True)
        status = answer.get("trade_status", "")
        if status in PAID:
            return PaymentQuery(
                state=PaymentQuery.PAID,
                amount_fen=fen_from_yuan_text(answer.get("total_amount", "")),
                currency="CNY",
                reference=answer.get("trade_no", ""),
            )
        return PaymentQuery(state=PaymentQuery.CLOSED if status == "TRADE_CLOSED" else PaymentQuery.PENDING)

    def close(self, *, order) -> None:
        try:
            answer = self._call(self.client.api_alipay_trade_close, out_trade_no=out_trade_no(order))
        except GatewayError as exc:
            if any(code in str(exc) for code in NOT_THERE):
                return
            raise
        if answer.get("code") != "10000" and answer.get("sub_code") not in NOT_THERE:
            raise GatewayError(f"Alipay did not close the trade: {answer.get('sub_code') or answer.get('msg')}")

    def refund(self, *, order, amount_fen: int, key: str) -> str:
        # out_request_no is Alipay's idempotency key for a partial refund: a repeat refunds once.
        request_no = key[-64:]
        answer = self._call(
            self.client.api_alipay_trade_refund,
            refund_amount=yuan_text_from_fen(amount_fen),
            out_trade_no=out_trade_no(order),
            out_request_no=request_no,
        )
        if answer.get("code") != "10000":
            raise GatewayError(f"Alipay refused the refund: {answer.get('sub_msg') or answer.get('msg')}")
        return f"{answer.get('trade_no', '')}:{request_no}"[:200]

    def settlements(self, *, day: date) -> list[SettledLine]:
        """The day's trade bill: ``alipay.data.dataservice.bill.downloadurl.query``, then the zip it names."""
        answer = self._call(
            self.client.server_api,
            api_name="alipay.data.dataservice.bill.downloadurl.query",
            biz_content={"bill_type": "trade", "bill_date": day.isoformat()},
        )
        if answer.get("code") != "10000" or not answer.get("bill_download_url"):
            raise GatewayError(
                f"Alipay has no bill for {day}: {answer.get('sub_code') or answer.get('msg')}", transient=True
            )
        try:
            with urlopen(answer["bill_download_url"], timeout=60) as download:  # noqa: S310 - Alipay's https URL
                return alipay_bill_parse(download.read())
        except (URLError, TimeoutError, OSError) as exc:
            raise GatewayError(f"Alipay's bill could not be downloaded: {exc}", transient=True) from exc


def alipay_bill_parse(archive: bytes) -> list[SettledLine]:
    """The lines of Alipay's trade bill: a zip holding ``…_业务明细.csv`` (and its summary), GBK text.

    The detail file opens and ends with ``#`` comment lines around a table whose header starts with
    ``支付宝交易号``; cells carry tab padding. 业务类型 ``交易`` is a payment of 订单金额; ``退款`` a refund
    of what the merchant gave back (商家实收, negative on that line). An entry that names no order of
    ours (another shop on the account) keeps ``order_id=None``.
    """
    with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
        names = [name for name in bundle.namelist() if name.endswith(".csv") and "汇总" not in name]
        if not names:
            raise GatewayError("Alipay's bill archive holds no detail file.")
        text = bundle.read(names[0]).decode("gbk")
    rows = [row for row in csv.reader(io.StringIO(text)) if row and not row[0].startswith("#")]
    if not rows or rows[0][0].strip() != "支付宝交易号":
        raise GatewayError("Alipay's bill has no table of trades.")
    header = [cell.strip() for cell in rows[0]]
    lines = []
    for row in rows[1:]:
        cells = dict(zip(header, (cell.strip() for cell in row), strict=False))
        kind = {"交易": SettledLine.PAYMENT, "退款": SettledLine.REFUND}.get(cells.get("业务类型", ""))
        if kind is None:
            continue
        column = "订单金额（元）" if kind == SettledLine.PAYMENT else "商家实收（元）"
        try:
            order_id = order_id_from(cells.get("商户订单号", ""))
        except WebhookRejected:
            order_id = None
        lines.append(
            SettledLine(
                kind=kind,
                order_id=order_id,
                amount_fen=fen_from_yuan_text(cells[column].lstrip("-")),
                reference=cells.get("退款批次号/请求号") or cells.get("支付宝交易号", ""),
            )
        )
    return lines


class AlipayQRGateway(AlipayGateway):
    """Alipay's 当面付 precreate: the order page shows a QR code the payer scans with the Alipay app."""

    name = "alipay_qr"
    label = _("Alipay (scan to pay)")

    def create_checkout(self, *, order, return_url: str) -> str:
        answer = self._call(
            self.client.api_alipay_trade_precreate,
            subject=self._subject(order),
            out_trade_no=out_trade_no(order),
            total_amount=yuan_text_from_fen(order.amount_fen),
            notify_url=notify_url(self.name),
            timeout_express=f"{max(1, settings.BILLING_TOPUP_ORDER_TTL_S // 60)}m",
        )
        if answer.get("code") != "10000" or not answer.get("qr_code"):
            raise GatewayError(f"Alipay did not open the trade: {answer.get('sub_msg') or answer.get('msg')}")
        order.gateway_reference = out_trade_no(order)
        order.checkout_qr = answer["qr_code"][:500]
        return return_url
