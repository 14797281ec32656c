"""WeChat Pay API v3 (微信支付): Native pay, a QR code the payer scans with WeChat.

wechatpayv3 signs our requests with the merchant's private key (``WECHATPAY2-SHA256-RSA2048``) and
verifies WeChat Pay's answers. Notifications are verified here, not by the SDK: its ``callback``, shown
a certificate serial it does not hold, empties its certificate list and downloads WeChat Pay's again,
so anyone could post a notification naming a made-up serial and leave the console with no
certificate (every later notification and answer refused until a download succeeds), at the cost of
one request to WeChat Pay per post. Here a notification is checked only against the keys configured:
WeChat Pay's public key (``WECHATPAY_PUBLIC_KEY_FILE`` and ``WECHATPAY_PUBLIC_KEY_ID``, public-key
mode) or the platform certificates in ``WECHATPAY_PLATFORM_CERT_DIR``; an unknown serial is refused.
New platform certificates are downloaded into that folder by a scheduled task
(``wechatpay_certificates_refresh``, from beat), never because a notification asked. The resource is
decrypted with the APIv3 key (AEAD_AES_256_GCM).

On top, the console refuses notifications whose ``Wechatpay-Timestamp`` is outside
``BILLING_GATEWAY_WEBHOOK_TOLERANCE_S`` (WeChat Pay's advice against replays), and checks that the
decrypted transaction is for this merchant and app, for the order's amount and currency.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from functools import cached_property, lru_cache
from pathlib import Path

import requests
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from wechatpayv3 import WeChatPay, WeChatPayType
from wechatpayv3.utils import aes_decrypt, rsa_verify

from billing.gateways.base import (
    GatewayError,
    PaymentGateway,
    PaymentQuery,
    RefundAnswer,
    SettledLine,
    WebhookEvent,
    WebhookRejected,
    fen_from_yuan_text,
    header_get,
    notify_url,
    order_id_from,
    out_trade_no,
)

logger = logging.getLogger(__name__)

HEADERS = (
    "Wechatpay-Signature",
    "Wechatpay-Timestamp",
    "Wechatpay-Nonce",
    "Wechatpay-Serial",
    "Wechatpay-Signature-Type",
)
REFUND_ACCEPTED = {"SUCCESS", "PROCESSING"}
SIGNATURE_TYPE = "WECHATPAY2-SHA256-RSA2048"


@lru_cache(maxsize=4)
def _certificates_in(folder: str, listing: tuple[tuple[str, int], ...]) -> dict[str, x509.Certificate]:
    """The platform certificates in ``folder``, by upper-case hex serial; read again when ``listing``
    (names and modification times) changes, that is when the refresh task writes a new one."""
    found = {}
    for name, _mtime in listing:
        try:
            cert = x509.load_pem_x509_certificate(Path(folder, name).read_bytes())
        except (OSError, ValueError):
            logger.warning("WeChat Pay platform certificate %s could not be read", name)
            continue
        found[format(cert.serial_number, "X")] = cert
    return found


def platform_keys() -> dict[str, RSAPublicKey]:
    """The keys a notification may be signed with, by the serial it names (upper case): WeChat Pay's
    public key in public-key mode, and each platform certificate of ``WECHATPAY_PLATFORM_CERT_DIR``
    valid now. Configuration only: nothing here asks WeChat Pay."""
    keys: dict[str, RSAPublicKey] = {}
    if settings.WECHATPAY_PUBLIC_KEY_ID and settings.WECHATPAY_PUBLIC_KEY_FILE:
        key = load_pem_public_key(Path(settings.WECHATPAY_PUBLIC_KEY_FILE).read_bytes())
        if isinstance(key, RSAPublicKey):
            keys[settings.WECHATPAY_PUBLIC_KEY_ID.upper()] = key
    folder = settings.WECHATPAY_PLATFORM_CERT_DIR
    if folder and os.path.isdir(folder):
        listing = tuple(
            sorted((e.name, e.stat().st_mtime_ns) for e in os.scandir(folder) if e.name.lower().endswith(".pem"))
        )
        now = datetime.now(UTC)
        for serial, cert in _certificates_in(folder, listing).items():
            key = cert.public_key()
            if cert.not_valid_before_utc <= now <= cert.not_valid_after_utc and isinstance(key, RSAPublicKey):
                keys[serial] = key
    return keys


class WeChatPayGateway(PaymentGateway):
    """WeChat Pay Native: the order page shows the ``code_url`` as a QR code."""

    name = "wechatpay"
    label = _("WeChat Pay")

    @cached_property
    def client(self) -> WeChatPay:
        # Built on first use, not at start-up: constructing it may ask WeChat Pay for certificates.
        public_key = {}
        if settings.WECHATPAY_PUBLIC_KEY_ID and settings.WECHATPAY_PUBLIC_KEY_FILE:
            # Public-key mode: the SDK verifies answers with this key and never downloads certificates.
            public_key = {
                "public_key": Path(settings.WECHATPAY_PUBLIC_KEY_FILE).read_text(),
                "public_key_id": settings.WECHATPAY_PUBLIC_KEY_ID,
            }
        try:
            return WeChatPay(
                **public_key,
                wechatpay_type=WeChatPayType.NATIVE,
                mchid=settings.WECHATPAY_MCH_ID,
                private_key=Path(settings.WECHATPAY_PRIVATE_KEY_FILE).read_text(),
                cert_serial_no=settings.WECHATPAY_CERT_SERIAL_NO,
                appid=settings.WECHATPAY_APP_ID,
                apiv3_key=settings.WECHATPAY_APIV3_KEY,
                notify_url=notify_url(self.name),
                cert_dir=settings.WECHATPAY_PLATFORM_CERT_DIR or None,
                logger=logger,
                timeout=(5, 15),
            )
        except (OSError, requests.RequestException) as exc:
            raise GatewayError(f"WeChat Pay is not set up or not reachable: {exc}", transient=True) from exc

    def is_configured(self) -> list[str]:
        needed = (
            "WECHATPAY_MCH_ID",
            "WECHATPAY_APP_ID",
            "WECHATPAY_PRIVATE_KEY_FILE",
            "WECHATPAY_CERT_SERIAL_NO",
            "WECHATPAY_APIV3_KEY",
            "BILLING_NOTIFY_BASE_URL",
        )
        missing = [name for name in needed if not getattr(settings, name, "")]
        public_key_mode = settings.WECHATPAY_PUBLIC_KEY_ID and settings.WECHATPAY_PUBLIC_KEY_FILE
        if not public_key_mode and not settings.WECHATPAY_PLATFORM_CERT_DIR:
            missing.append("WECHATPAY_PLATFORM_CERT_DIR")
        return missing

    def _request(self, call, **kwargs) -> tuple[int, dict]:
        """One API call; the SDK verifies the answer's signature (and raises when it does not verify)."""
        try:
            code, message = call(**kwargs)
        except requests.RequestException as exc:
            raise GatewayError(f"WeChat Pay is not reachable: {exc}", transient=True) from exc
        except Exception as exc:  # the SDK raises a bare Exception for an answer that does not verify
            raise GatewayError(f"WeChat Pay's answer was refused: {exc}") from exc
        try:
            body = json.loads(message) if message else {}
        except (TypeError, ValueError):
            body = {}
        return code, body if isinstance(body, dict) else {}

    def create_checkout(self, *, order, return_url: str) -> str:
        expire = timezone.localtime(order.created_at + timedelta(seconds=settings.BILLING_TOPUP_ORDER_TTL_S))
        code, body = self._request(
            self.client.pay,
            description=f"{settings.CONSOLE_SITE_NAME} top-up #{order.pk}"[:127],
            out_trade_no=out_trade_no(order),
            amount={"total": order.amount_fen, "currency": "CNY"},
            time_expire=expire.isoformat(timespec="seconds"),
            pay_type=WeChatPayType.NATIVE,
        )
        if code != 200 or not body.get("code_url"):
            raise GatewayError(
                f"WeChat Pay did not open the order: {body.get('code')} {body.get('message')}", transient=code >= 500
            )
        order.gateway_reference = out_trade_no(order)
        order.checkout_qr = body["code_url"][:500]
        return return_url

    def verify_webhook(self, *, body: bytes, headers: Mapping[str, str]) -> WebhookEvent:
        found = {name: header_get(headers, name) for name in HEADERS}
        if not found["Wechatpay-Signature"]:
            raise WebhookRejected("signature_missing", "The notification is not signed.", status=401)
        try:
            timestamp = int(found["Wechatpay-Timestamp"] or "")
        except ValueError:
            raise WebhookRejected("signature_malformed", "The notification has no valid timestamp.") from None
        if abs(time.time() - timestamp) > int(settings.BILLING_GATEWAY_WEBHOOK_TOLERANCE_S):
            raise WebhookRejected(
                "signature_stale", "The notification's timestamp is outside the tolerance.", status=401
            )
        result = self._notification_open(found, body=body)
        event_type = result.get("event_type", "")
        resource = result.get("resource") or {}
        if not event_type.startswith("TRANSACTION."):
            # Refund results (REFUND.*) credit nothing: they prompt the order's pending refunds to settle.
            return WebhookEvent(
                id=str(result.get("id", ""))[:200],
                type=WebhookEvent.REFUND_UPDATED if event_type.startswith("REFUND.") else WebhookEvent.PAYMENT_PENDING,
                order_id=order_id_from(resource.get("out_trade_no", "")),
                amount_fen=0,
                currency="CNY",
                payload=result,
            )
        if resource.get("mchid") != settings.WECHATPAY_MCH_ID or resource.get("appid") != settings.WECHATPAY_APP_ID:
            raise WebhookRejected("unknown_app", "The notification is for another merchant or app.")
        amount = resource.get("amount") or {}
        total = amount.get("total")
        if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
            raise WebhookRejected("malformed", "The notification has no valid amount.")
        state = resource.get("trade_state", "")
        if state == "SUCCESS":
            kind = WebhookEvent.PAYMENT_SUCCEEDED
        elif state in ("CLOSED", "PAYERROR", "REVOKED"):
            kind = WebhookEvent.PAYMENT_FAILED
        else:
            kind = WebhookEvent.PAYMENT_PENDING
        return WebhookEvent(
            id=str(result.get("id", ""))[:200] or f"wx:{resource.get('transaction_id')}:{state}",
            type=kind,
            order_id=order_id_from(resource.get("out_trade_no", "")),
            amount_fen=total,
            currency=str(amount.get("currency", "")),
            reference=str(resource.get("transaction_id", ""))[:200],
            payload=result,
        )

    def _notification_open(self, found: Mapping[str, str | None], *, body: bytes) -> dict:
        """The notification with its ``resource`` decrypted, once its signature verifies with a key
        configured for the serial it names (``platform_keys``); an unknown serial is refused as it
        is, with no download and no change to the keys held."""
        rejected = WebhookRejected(
            "signature_invalid", "The notification's signature or resource does not verify.", status=401
        )
        key = platform_keys().get((found["Wechatpay-Serial"] or "").strip().upper())
        if key is None:
            raise WebhookRejected(
                "unknown_certificate", "The notification names a certificate this console does not hold.", status=401
            )
        if found["Wechatpay-Signature-Type"] != SIGNATURE_TYPE:
            raise rejected
        try:
            text = body.decode("utf-8")
            verified = rsa_verify(
                found["Wechatpay-Timestamp"], found["Wechatpay-Nonce"] or "", text, found["Wechatpay-Signature"], key
            )
        except (UnicodeDecodeError, ValueError, TypeError):
            verified = False
        if not verified:
            raise rejected
        try:
            data = json.loads(text)
            resource = data["resource"]
            if data.get("resource_type") != "encrypt-resource" or resource.get("algorithm") != "AEAD_AES_256_GCM":
                raise rejected
            plain = aes_decrypt(
                nonce=resource["nonce"],
                ciphertext=resource["ciphertext"],
                associated_data=resource.get("associated_data") or "",
                apiv3_key=settings.WECHATPAY_APIV3_KEY,
            )
            data["resource"] = json.loads(plain) if plain else None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise rejected from exc
        if not isinstance(data.get("resource"), dict):
            raise rejected
        return data

    def platform_certificates_refresh(self) -> int:
        """Download WeChat Pay's platform certificates into ``WECHATPAY_PLATFORM_CERT_DIR``; the number
        of new ones. Each arrives encrypted with the APIv3 key, which is what vouches for it; a file
        is written whole (renamed into place) and never removed: an expired one is simply not used."""
        folder = settings.WECHATPAY_PLATFORM_CERT_DIR
        if not folder or (settings.WECHATPAY_PUBLIC_KEY_ID and settings.WECHATPAY_PUBLIC_KEY_FILE):
            return 0
        code, body = self._request(self.client._core.request, path="/v3/certificates", skip_verify=True)
        if code != 200:
            raise GatewayError(f"WeChat Pay did not list its certificates: {body.get('code')}", transient=True)
        written = 0
        Path(folder).mkdir(parents=True, exist_ok=True)
        for item in body.get("data") or []:
            sealed = item.get("encrypt_certificate") or {}
            try:
                pem = aes_decrypt(
                    nonce=sealed["nonce"],
                    ciphertext=sealed["ciphertext"],
                    associated_data=sealed.get("associated_data") or "",
                    apiv3_key=settings.WECHATPAY_APIV3_KEY,
                )
                cert = x509.load_pem_x509_certificate(pem.encode())
            except (KeyError, ValueError, TypeError, AttributeError):
                logger.warning("WeChat Pay listed a certificate that does not decrypt: %s", item.get("serial_no"))
                continue
            target = Path(folder, f"{format(cert.serial_number, 'X')}.pem")
            if target.exists():
                continue
            partial = target.with_suffix(".pem.partial")
            partial.write_text(pem)
            partial.replace(target)
            written += 1
        return written

    def webhook_ack(self) -> tuple[int, str, bytes]:
        return 200, "application/json", b'{"code":"SUCCESS","message":"OK"}'

    def query(self, *, order) -> PaymentQuery:
        code, body = self._request(self.client.query, out_trade_no=out_trade_no(order))
        if code == 404 or body.get("code") == "ORDER_NOT_EXIST":
            return PaymentQuery(state=PaymentQuery.CLOSED)
        if code != 200:
            raise GatewayError(f"WeChat Pay could not say: {body.get('code')}", transient=True)
        state = body.get("trade_state", "")
        if state == "SUCCESS":
            amount = body.get("amount") or {}
            return PaymentQuery(
                state=PaymentQuery.PAID,
                amount_fen=int(amount.get("total", 0)),
                currency=str(amount.get("currency", "")),
                reference=str(body.get("transaction_id", "")),
            )
        if state in ("CLOSED", "PAYERROR", "REVOKED"):
            return PaymentQuery(state=PaymentQuery.CLOSED)
        return PaymentQuery(state=PaymentQuery.PENDING)

    def close(self, *, order) -> None:
        code, body = self._request(self.client.close, out_trade_no=out_trade_no(order))
        if code not in (200, 204) and body.get("code") not in ("ORDER_CLOSED", "ORDER_NOT_EXIST"):
            raise GatewayError(f"WeChat Pay did not close the order: {body.get('code')}", transient=code >= 500)

    def settlements(self, *, day: date) -> list[SettledLine]:
        """The day's trade bill: ``/v3/bill/tradebill`` names a gzip file, checked against its SHA1."""
        code, body = self._request(self.client.trade_bill, bill_date=day.isoformat(), bill_type="ALL", tar_type="GZIP")
        if code != 200 or not body.get("download_url"):
            raise GatewayError(f"WeChat Pay has no bill for {day}: {body.get('code')}", transient=True)
        try:
            code, content = self.client.download_bill(body["download_url"])
        except requests.RequestException as exc:
            raise GatewayError(f"WeChat Pay's bill could not be downloaded: {exc}", transient=True) from exc
        if code != 200 or not isinstance(content, bytes):
            raise GatewayError(f"WeChat Pay's bill could not be downloaded ({code}).", transient=True)
        raw = gzip.decompress(content)
        if body.get("hash_type") == "SHA1" and hashlib.sha1(raw).hexdigest() != body.get("hash_value", "").lower():  # noqa: S324 - WeChat Pay's own integrity digest
            raise GatewayError("WeChat Pay's bill does not match its digest.", transient=True)
        return wechat_bill_parse(raw.decode("utf-8"))

    def refund(self, *, order, amount_fen: int, key: str) -> str:
        # out_refund_no is WeChat Pay's idempotency key: a repeat answers the first refund.
        refund_no = "rf_" + _digest(key)
        code, body = self._request(
            self.client.refund,
            out_refund_no=refund_no,
            amount={"refund": amount_fen, "total": order.amount_fen, "currency": "CNY"},
            out_trade_no=out_trade_no(order),
        )
        if code != 200 or body.get("status") not in REFUND_ACCEPTED:
            raise GatewayError(
                f"WeChat Pay refused the refund: {body.get('code') or body.get('status')} {body.get('message', '')}"
            )
        state = RefundAnswer.SUCCEEDED if body["status"] == "SUCCESS" else RefundAnswer.PENDING
        return RefundAnswer(id=str(body.get("refund_id") or refund_no)[:200], state=state)

    def refund_state(self, *, order, refund_id: str, key: str) -> str:
        code, body = self._request(self.client.query_refund, out_refund_no="rf_" + _digest(key))
        if code != 200:
            raise GatewayError(f"WeChat Pay could not say: {body.get('code')}", transient=True)
        return {"SUCCESS": RefundAnswer.SUCCEEDED, "CLOSED": RefundAnswer.FAILED, "ABNORMAL": RefundAnswer.FAILED}.get(
            body.get("status", ""), RefundAnswer.PENDING
        )


def wechat_bill_parse(text: str) -> list[SettledLine]:
    """The lines of WeChat Pay's trade bill (``bill_type=ALL``), CSV whose cells start with a backtick.

    交易状态 ``SUCCESS`` is a payment of 订单金额; ``REFUND`` a refund of 退款金额 (the line repeats the
    order's number). The table ends where the summary (``总交易单数``…) begins.
    """
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows or rows[0][0].strip() != "交易时间":
        raise GatewayError("WeChat Pay's bill has no table of trades.")
    header = [cell.strip() for cell in rows[0]]
    lines = []
    for row in rows[1:]:
        if not row or row[0].strip() == "总交易单数":
            break
        cells = dict(zip(header, (cell.strip().lstrip("`") for cell in row), strict=False))
        state = cells.get("交易状态", "")
        if state == "SUCCESS":
            kind, amount, reference = SettledLine.PAYMENT, cells.get("订单金额", ""), cells.get("微信订单号", "")
        elif state == "REFUND":
            kind, amount, reference = SettledLine.REFUND, cells.get("退款金额", ""), cells.get("微信退款单号", "")
        else:
            continue
        try:
            order_id = order_id_from(cells.get("商户订单号", ""))
        except WebhookRejected:
            order_id = None
        lines.append(
            SettledLine(kind=kind, order_id=order_id, amount_fen=fen_from_yuan_text(amount), reference=reference)
        )
    return lines


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:29]
