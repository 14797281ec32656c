"""Alipay, WeChat Pay and Stripe as the tests meet them: keys made here, HTTP answered at the transport.

Each fake server holds its own keys (generated once per test session with ``cryptography``), checks
that the console signed its request as the real gateway requires, answers as the gateway's
documentation shows and signs the answer as the gateway would, so the SDKs' own verification runs.
Notifications are built and signed the same way. Nothing leaves the process: Alipay's SDK calls
``urlopen`` (patched where the SDK looks it up), WeChat Pay's and Stripe's go through requests, whose
``HTTPAdapter.send`` is the seam.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import hashlib
import hmac
import io
import json
import os
import time
import uuid
import zipfile
from functools import cache
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID
from requests.structures import CaseInsensitiveDict


@cache
def rsa_key(label: str) -> rsa.RSAPrivateKey:
    """One 2048-bit key per ``label`` per test session (generating them is the slow part)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def rsa_sha256_b64(key: rsa.RSAPrivateKey, message: str) -> str:
    return base64.b64encode(key.sign(message.encode(), padding.PKCS1v15(), hashes.SHA256())).decode()


def rsa_sha256_check(key: rsa.RSAPrivateKey, message: str, signature_b64: str) -> None:
    """Raises ``InvalidSignature`` unless ``signature_b64`` is ``key``'s signature of ``message``."""
    key.public_key().verify(base64.b64decode(signature_b64), message.encode(), padding.PKCS1v15(), hashes.SHA256())


def response(status: int, body: bytes, headers: dict[str, str], request=None) -> requests.Response:
    answer = requests.Response()
    answer.status_code = status
    answer._content = body
    answer.headers = CaseInsensitiveDict(headers)
    answer.encoding = "utf-8"
    answer.request = request
    answer.url = request.url if request is not None else ""
    return answer


# --- Alipay ------------------------------------------------------------------------------------------


class FakeAlipay:
    """Alipay's open API gateway: trades by ``out_trade_no``, refunds by ``out_request_no``."""

    APP_ID = "2021000000000001"

    def __init__(self):
        self.app_key = rsa_key("alipay-app")  # the merchant's key pair: the console signs with it
        self.alipay_key = rsa_key("alipay-platform")  # Alipay's: it signs answers and notifications
        self.trades: dict[str, dict] = {}
        self.refunds: dict[tuple[str, str], dict] = {}
        self.calls: list[tuple[str, dict]] = []
        self.refuse_refunds = False
        self.bill: bytes | None = None  # the zip the bill download URL serves; None: "no bill yet"

    def settings(self, tmp_path: Path) -> dict:
        app_key, alipay_public = tmp_path / "alipay-app.pem", tmp_path / "alipay-public.pem"
        app_key.write_text(private_pem(self.app_key))
        alipay_public.write_text(public_pem(self.alipay_key))
        return {
            "ALIPAY_APP_ID": self.APP_ID,
            "ALIPAY_APP_PRIVATE_KEY_FILE": str(app_key),
            "ALIPAY_PUBLIC_KEY_FILE": str(alipay_public),
        }

    def check_request_signature(self, params: dict) -> None:
        """What Alipay does first: the request is signed RSA2 by the app's key (over every parameter but
        ``sign``; unlike a notification, a request's ``sign_type`` is signed too)."""
        params = dict(params)
        signature = params.pop("sign")
        assert params["sign_type"] == "RSA2"
        rsa_sha256_check(self.app_key, "&".join(f"{k}={v}" for k, v in sorted(params.items())), signature)

    def urlopen(self, url: str, timeout=None):
        params = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
        self.check_request_signature(params)
        assert params["app_id"] == self.APP_ID
        method, biz = params["method"], json.loads(params["biz_content"])
        self.calls.append((method, biz))
        inner = getattr(self, "_" + method.replace(".", "_"))(biz)
        inner_json = json.dumps(inner, ensure_ascii=False, separators=(",", ":"))
        key = method.replace(".", "_") + "_response"
        raw = f'{{"{key}":{inner_json},"sign":"{rsa_sha256_b64(self.alipay_key, inner_json)}"}}'
        return io.BytesIO(raw.encode())

    def _alipay_data_dataservice_bill_downloadurl_query(self, biz: dict) -> dict:
        if self.bill is None:
            return {
                "code": "40004",
                "msg": "Business Failed",
                "sub_code": "isp.bill_not_exist",
                "sub_msg": "账单不存在",
            }
        return {
            "code": "10000",
            "msg": "Success",
            "bill_download_url": f"https://dwbillcenter.alipay.com/downloadBillFile.resource?bizType=trade&date={biz['bill_date']}",
        }

    def download(self, url: str, timeout=None):
        assert url.startswith("https://dwbillcenter.alipay.com/") and self.bill is not None
        return io.BytesIO(self.bill)

    @staticmethod
    def bill_archive(csv_text: str, day: str = "20261130") -> bytes:
        """The zip Alipay serves: the detail CSV and its summary, both GBK."""
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr(f"20881021778468750156_{day}_业务明细.csv", csv_text.encode("gbk"))
            bundle.writestr(f"20881021778468750156_{day}_业务明细(汇总).csv", "#支付宝业务汇总查询\n".encode("gbk"))
        return archive.getvalue()

    def _alipay_trade_precreate(self, biz: dict) -> dict:
        trade = self.trades.setdefault(
            biz["out_trade_no"], {"total_amount": biz["total_amount"], "status": "WAIT_BUYER_PAY", "trade_no": ""}
        )
        trade["trade_no"] = trade["trade_no"] or f"2026{uuid.uuid4().int % 10**24:024d}"
        return {
            "code": "10000",
            "msg": "Success",
            "out_trade_no": biz["out_trade_no"],
            "qr_code": f"https://qr.alipay.com/bax0{biz['out_trade_no']}",
        }

    def _alipay_trade_query(self, biz: dict) -> dict:
        trade = self.trades.get(biz["out_trade_no"])
        if trade is None:
            return {
                "code": "40004",
                "msg": "Business Failed",
                "sub_code": "ACQ.TRADE_NOT_EXIST",
                "sub_msg": "交易不存在",
            }
        return {
            "code": "10000",
            "msg": "Success",
            "out_trade_no": biz["out_trade_no"],
            "trade_no": trade["trade_no"],
            "trade_status": trade["status"],
            "total_amount": trade["total_amount"],
        }

    def _alipay_trade_close(self, biz: dict) -> dict:
        trade = self.trades.get(biz["out_trade_no"])
        if trade is None:
            return {
                "code": "40004",
                "msg": "Business Failed",
                "sub_code": "ACQ.TRADE_NOT_EXIST",
                "sub_msg": "交易不存在",
            }
        if trade["status"] != "WAIT_BUYER_PAY":
            return {
                "code": "40004",
                "msg": "Business Failed",
                "sub_code": "ACQ.TRADE_STATUS_ERROR",
                "sub_msg": "状态不合法",
            }
        trade["status"] = "TRADE_CLOSED"
        return {"code": "10000", "msg": "Success", "out_trade_no": biz["out_trade_no"], "trade_no": trade["trade_no"]}

    def _alipay_trade_refund(self, biz: dict) -> dict:
        trade = self.trades.get(biz["out_trade_no"])
        if self.refuse_refunds or trade is None or trade["status"] != "TRADE_SUCCESS":
            return {
                "code": "40004",
                "msg": "Business Failed",
                "sub_code": "ACQ.TRADE_STATUS_ERROR",
                "sub_msg": "交易状态不合法",
            }
        refund = self.refunds.setdefault((biz["out_trade_no"], biz["out_request_no"]), {"amount": biz["refund_amount"]})
        return {
            "code": "10000",
            "msg": "Success",
            "trade_no": trade["trade_no"],
            "out_trade_no": biz["out_trade_no"],
            "refund_fee": refund["amount"],
            "fund_change": "Y",
        }

    def pay(self, out_trade_no: str, total_amount: str | None = None) -> None:
        """The payer pays (at the cashier or by scanning): the trade exists and succeeded."""
        trade = self.trades.setdefault(out_trade_no, {"total_amount": total_amount, "trade_no": ""})
        trade["trade_no"] = trade["trade_no"] or f"2026{uuid.uuid4().int % 10**24:024d}"
        trade["status"] = "TRADE_SUCCESS"
        if total_amount is not None:
            trade["total_amount"] = total_amount

    def notification(
        self, *, out_trade_no: str, total_amount: str, trade_status: str = "TRADE_SUCCESS", **extra
    ) -> bytes:
        """The asynchronous notification's form body, signed RSA2 as Alipay signs it (all but sign/sign_type).

        ``signer=`` another key forges it; other keywords add or replace fields.
        """
        signer = extra.pop("signer", None) or self.alipay_key
        trade = self.trades.get(out_trade_no, {})
        fields = {
            "notify_time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "notify_type": "trade_status_sync",
            "notify_id": uuid.uuid4().hex,
            "charset": "utf-8",
            "version": "1.0",
            "app_id": self.APP_ID,
            "trade_no": trade.get("trade_no") or "2026000000000000000000000001",
            "out_trade_no": out_trade_no,
            "trade_status": trade_status,
            "total_amount": total_amount,
            "receipt_amount": total_amount,
            "buyer_id": "2088102177846875",
            "seller_id": "2088101117955611",
            "gmt_payment": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        fields.update(extra)
        signed = "&".join(f"{k}={v}" for k, v in sorted(fields.items()))
        fields["sign"] = rsa_sha256_b64(signer, signed)
        fields["sign_type"] = "RSA2"
        return urlencode(fields).encode()


# --- WeChat Pay --------------------------------------------------------------------------------------


class FakeWeChatPay:
    """WeChat Pay API v3: orders by ``out_trade_no``, answers and notifications signed by the platform."""

    MCH_ID = "1900000109"
    APP_ID = "wxd678efh567hg6787"
    MERCHANT_SERIAL = "444F4864EA9B34415B5B1A2B3C4D5E6F70818293"
    APIV3_KEY = "a12d3924fd499edac8a5efc0b4e7f2c1"  # 32 bytes: AES-256

    def __init__(self):
        self.merchant_key = rsa_key("wechat-merchant")
        self.platform_key = rsa_key("wechat-platform")
        self.platform_cert = self._certificate(self.platform_key)
        self.orders: dict[str, dict] = {}
        self.refunds: dict[str, dict] = {}
        self.calls: list[tuple[str, str, dict]] = []
        self.refund_status = "PROCESSING"
        self.bill: bytes | None = None  # the trade bill's CSV (uncompressed)
        self.listed = [self.platform_cert]  # what GET /v3/certificates lists (sealed with the APIv3 key)
        self.certificates_down = False  # GET /v3/certificates answers 500

    @staticmethod
    def _certificate(key: rsa.RSAPrivateKey) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tenpay.com Root CA")])
        now = dt.datetime.now(dt.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=365))
            .sign(key, hashes.SHA256())
        )

    @property
    def platform_serial(self) -> str:
        return format(self.platform_cert.serial_number, "X")

    def settings(self, tmp_path: Path) -> dict:
        key_file, cert_dir = tmp_path / "wechat-merchant.pem", tmp_path / "wechat-platform"
        key_file.write_text(private_pem(self.merchant_key))
        cert_dir.mkdir(exist_ok=True)
        (cert_dir / f"{self.platform_serial}.pem").write_bytes(
            self.platform_cert.public_bytes(serialization.Encoding.PEM)
        )
        return {
            "WECHATPAY_MCH_ID": self.MCH_ID,
            "WECHATPAY_APP_ID": self.APP_ID,
            "WECHATPAY_PRIVATE_KEY_FILE": str(key_file),
            "WECHATPAY_CERT_SERIAL_NO": self.MERCHANT_SERIAL,
            "WECHATPAY_APIV3_KEY": self.APIV3_KEY,
            "WECHATPAY_PLATFORM_CERT_DIR": str(cert_dir),
        }

    def rotate(self) -> None:
        """A new platform key and certificate: listed beside the old one, and used to sign from now on."""
        self.platform_key = rsa_key(f"wechat-platform-{len(self.listed)}")
        self.platform_cert = self._certificate(self.platform_key)
        self.listed.append(self.platform_cert)

    def _certificates_answer(self) -> tuple[int, dict]:
        if self.certificates_down:
            return 500, {"code": "SYSTEM_ERROR", "message": "系统错误"}
        data = []
        for cert in self.listed:
            nonce = uuid.uuid4().hex[:12]
            pem = cert.public_bytes(serialization.Encoding.PEM)
            sealed = AESGCM(self.APIV3_KEY.encode()).encrypt(nonce.encode(), pem, b"certificate")
            data.append(
                {
                    "serial_no": format(cert.serial_number, "X"),
                    "effective_time": cert.not_valid_before_utc.isoformat(),
                    "expire_time": cert.not_valid_after_utc.isoformat(),
                    "encrypt_certificate": {
                        "algorithm": "AEAD_AES_256_GCM",
                        "nonce": nonce,
                        "associated_data": "certificate",
                        "ciphertext": base64.b64encode(sealed).decode(),
                    },
                }
            )
        return 200, {"data": data}

    def signed_headers(
        self,
        body: str,
        *,
        key: rsa.RSAPrivateKey | None = None,
        timestamp: int | None = None,
        serial: str | None = None,
    ) -> dict:
        timestamp = int(time.time()) if timestamp is None else timestamp
        nonce = uuid.uuid4().hex.upper()
        return {
            "Wechatpay-Timestamp": str(timestamp),
            "Wechatpay-Nonce": nonce,
            "Wechatpay-Signature": rsa_sha256_b64(key or self.platform_key, f"{timestamp}\n{nonce}\n{body}\n"),
            "Wechatpay-Serial": serial or self.platform_serial,
            "Wechatpay-Signature-Type": "WECHATPAY2-SHA256-RSA2048",
        }

    def check_authorization(self, request) -> None:
        """What WeChat Pay does first: the merchant's ``Authorization`` signature over the request."""
        scheme, _, fields = request.headers["Authorization"].partition(" ")
        assert scheme == "WECHATPAY2-SHA256-RSA2048"
        values = dict(part.split("=", 1) for part in fields.split(","))
        values = {k: v.strip('"') for k, v in values.items()}
        assert values["mchid"] == self.MCH_ID and values["serial_no"] == self.MERCHANT_SERIAL
        url = urlsplit(request.url)
        path = url.path + (f"?{url.query}" if url.query else "")
        body = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        message = f"{request.method}\n{path}\n{values['timestamp']}\n{values['nonce_str']}\n{body}\n"
        rsa_sha256_check(self.merchant_key, message, values["signature"])

    def send(self, request) -> requests.Response:
        self.check_authorization(request)
        url = urlsplit(request.url)
        body = json.loads(request.body) if request.body else {}
        self.calls.append((request.method, url.path, body))
        if url.path == "/v3/billdownload/file":  # the bill itself: gzip bytes, not signed (as WeChat Pay serves it)
            return response(200, gzip.compress(self.bill or b""), {"Content-Type": "application/octet-stream"}, request)
        if url.path == "/v3/bill/tradebill":
            if self.bill is None:
                status, answer = 400, {"code": "NO_STATEMENT_EXIST", "message": "账单文件不存在"}
            else:
                status, answer = (
                    200,
                    {
                        "hash_type": "SHA1",
                        "hash_value": hashlib.sha1(self.bill).hexdigest(),  # noqa: S324 - WeChat Pay's digest
                        "download_url": "https://api.mch.weixin.qq.com/v3/billdownload/file?token=6XIv5TUPto7pByrTQKhd6kwvyKLG2uY2wMMR8cNXqaA_Cv_isgaUtBzp4QtiozLO",
                    },
                )
        else:
            status, answer = self._route(request.method, url.path, body)
        text = json.dumps(answer, ensure_ascii=False) if answer is not None else ""
        headers = {"Content-Type": "application/json; charset=utf-8", **self.signed_headers(text)}
        return response(status, text.encode(), headers, request)

    def _route(self, method: str, path: str, body: dict) -> tuple[int, dict | None]:
        prefix = "/v3/pay/transactions/out-trade-no/"
        if method == "GET" and path == "/v3/certificates":
            return self._certificates_answer()
        if method == "POST" and path == "/v3/pay/transactions/native":
            assert body["mchid"] == self.MCH_ID and body["appid"] == self.APP_ID and body["notify_url"]
            self.orders.setdefault(body["out_trade_no"], {"amount": body["amount"], "trade_state": "NOTPAY"})
            return 200, {"code_url": f"weixin://wxpay/bizpayurl?pr={body['out_trade_no']}"}
        if method == "GET" and path.startswith(prefix):
            order = self.orders.get(path.removeprefix(prefix))
            if order is None:
                return 404, {"code": "ORDER_NOT_EXIST", "message": "订单不存在"}
            return 200, self.transaction(path.removeprefix(prefix))
        if method == "POST" and path.startswith(prefix) and path.endswith("/close"):
            order = self.orders.get(path.removeprefix(prefix).removesuffix("/close"))
            if order is not None and order["trade_state"] == "NOTPAY":
                order["trade_state"] = "CLOSED"
            return 204, None
        if method == "POST" and path == "/v3/refund/domestic/refunds":
            self.refunds.setdefault(
                body["out_refund_no"],
                {
                    "refund_id": f"50000{uuid.uuid4().int % 10**20:020d}",
                    "amount": body["amount"],
                    "out_trade_no": body["out_trade_no"],
                    "status": self.refund_status,
                },
            )
            return 200, self._refund_body(body["out_refund_no"])
        if method == "GET" and path.startswith("/v3/refund/domestic/refunds/"):
            out_refund_no = path.rsplit("/", 1)[-1]
            if out_refund_no not in self.refunds:
                return 404, {"code": "RESOURCE_NOT_EXISTS", "message": "退款单不存在"}
            return 200, self._refund_body(out_refund_no)
        return 404, {"code": "NOT_FOUND", "message": path}

    def _refund_body(self, out_refund_no: str) -> dict:
        refund = self.refunds[out_refund_no]
        return {
            "refund_id": refund["refund_id"],
            "out_refund_no": out_refund_no,
            "out_trade_no": refund["out_trade_no"],
            "status": refund["status"],
            "amount": {**refund["amount"], "payer_refund": refund["amount"]["refund"]},
        }

    def transaction(self, out_trade_no: str, **changes) -> dict:
        order = self.orders[out_trade_no]
        data = {
            "mchid": self.MCH_ID,
            "appid": self.APP_ID,
            "out_trade_no": out_trade_no,
            "transaction_id": order.get("transaction_id", "4200000000000000000000000001"),
            "trade_type": "NATIVE",
            "trade_state": order["trade_state"],
            "trade_state_desc": "支付成功",
            "bank_type": "OTHERS",
            "success_time": "2026-12-01T13:29:35+08:00",
            "payer": {"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
            "amount": {
                "total": order["amount"]["total"],
                "payer_total": order["amount"]["total"],
                "currency": "CNY",
                "payer_currency": "CNY",
            },
        }
        data.update(changes)
        return data

    def pay(self, out_trade_no: str) -> None:
        self.orders[out_trade_no]["trade_state"] = "SUCCESS"
        self.orders[out_trade_no]["transaction_id"] = f"42000{uuid.uuid4().int % 10**23:023d}"

    def notification(
        self, resource: dict, *, event_type: str = "TRANSACTION.SUCCESS", apiv3_key: str | None = None, **header_kwargs
    ) -> tuple[bytes, dict]:
        """The notification as WeChat Pay posts it: the resource sealed with AEAD_AES_256_GCM, the body signed."""
        nonce = uuid.uuid4().hex[:12]
        sealed = AESGCM((apiv3_key or self.APIV3_KEY).encode()).encrypt(
            nonce.encode(), json.dumps(resource, ensure_ascii=False).encode(), b"transaction"
        )
        body = json.dumps(
            {
                "id": str(uuid.uuid4()),
                "create_time": "2026-12-01T13:29:35+08:00",
                "resource_type": "encrypt-resource",
                "event_type": event_type,
                "summary": "支付成功",
                "resource": {
                    "original_type": "transaction",
                    "algorithm": "AEAD_AES_256_GCM",
                    "ciphertext": base64.b64encode(sealed).decode(),
                    "associated_data": "transaction",
                    "nonce": nonce,
                },
            },
            ensure_ascii=False,
        )
        return body.encode(), self.signed_headers(body, **header_kwargs)


# --- Stripe ------------------------------------------------------------------------------------------


class FakeStripe:
    """Stripe's API for Checkout Sessions and Refunds, honouring ``Idempotency-Key`` as Stripe does."""

    SECRET_KEY = "sk_test_console"
    WEBHOOK_SECRET = "whsec_" + base64.b32encode(os.urandom(20)).decode().lower()

    def __init__(self):
        self.sessions: dict[str, dict] = {}
        self.refunds: dict[str, dict] = {}
        self.by_key: dict[str, tuple[int, dict]] = {}
        self.calls: list[tuple[str, str, dict]] = []
        self.balance_transactions: dict | None = None  # a recorded /v1/balance_transactions page
        self.refund_status = "succeeded"  # what a new refund says ("pending" for bank transfers, say)

    def settings(self) -> dict:
        return {"STRIPE_SECRET_KEY": self.SECRET_KEY, "STRIPE_WEBHOOK_SECRET": self.WEBHOOK_SECRET}

    def send(self, request) -> requests.Response:
        assert request.headers["Authorization"] == f"Bearer {self.SECRET_KEY}"
        url = urlsplit(request.url)
        body = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        form = dict(parse_qsl(body, keep_blank_values=True))
        self.calls.append((request.method, url.path, form))
        key = request.headers.get("Idempotency-Key")
        if request.method == "POST" and key and key in self.by_key:
            status, answer = self.by_key[key]
        else:
            status, answer = self._route(request.method, url.path, form)
            if request.method == "POST" and key:
                self.by_key[key] = (status, answer)
        return response(status, json.dumps(answer).encode(), {"Content-Type": "application/json"}, request)

    def _route(self, method: str, path: str, form: dict) -> tuple[int, dict]:
        if method == "GET" and path == "/v1/balance_transactions":
            return 200, self.balance_transactions or {"object": "list", "data": [], "has_more": False, "url": path}
        if method == "POST" and path == "/v1/checkout/sessions":
            session_id = "cs_test_" + uuid.uuid4().hex
            self.sessions[session_id] = {
                "id": session_id,
                "object": "checkout.session",
                "url": f"https://checkout.stripe.com/c/pay/{session_id}",
                "mode": form["mode"],
                "client_reference_id": form["client_reference_id"],
                "metadata": {"order": form["metadata[order]"]},
                "amount_total": int(form["line_items[0][price_data][unit_amount]"]),
                "currency": form["line_items[0][price_data][currency]"],
                "payment_status": "unpaid",
                "status": "open",
                "payment_intent": None,
                "success_url": form["success_url"],
                "expires_at": int(form["expires_at"]),
            }
            return 200, self.sessions[session_id]
        if path.startswith("/v1/checkout/sessions/"):
            session_id = path.split("/")[4]
            session = self.sessions.get(session_id)
            if session is None:
                return 404, {"error": {"type": "invalid_request_error", "message": "No such checkout.session"}}
            if method == "POST" and path.endswith("/expire"):
                if session["status"] != "open":
                    return 400, {"error": {"type": "invalid_request_error", "message": "Session is not open"}}
                session["status"] = "expired"
            return 200, session
        if method == "POST" and path == "/v1/refunds":
            refund_id = "re_" + uuid.uuid4().hex
            self.refunds[refund_id] = {
                "id": refund_id,
                "object": "refund",
                "amount": int(form["amount"]),
                "payment_intent": form["payment_intent"],
                "status": self.refund_status,
                "currency": "cny",
            }
            return 200, self.refunds[refund_id]
        if method == "GET" and path.startswith("/v1/refunds/"):
            refund = self.refunds.get(path.rsplit("/", 1)[-1])
            if refund is None:
                return 404, {"error": {"type": "invalid_request_error", "message": "No such refund"}}
            return 200, refund
        return 404, {"error": {"type": "invalid_request_error", "message": f"Unrecognized request URL {path}"}}

    def pay(self, session_id: str) -> dict:
        session = self.sessions[session_id]
        session.update(payment_status="paid", status="complete", payment_intent="pi_" + uuid.uuid4().hex[:24])
        return session

    def event(self, event_type: str, session: dict, *, secret: str | None = None, timestamp: int | None = None):
        """A webhook delivery as Stripe sends it: the event JSON and its ``Stripe-Signature`` header."""
        event = {
            "id": "evt_" + uuid.uuid4().hex[:24],
            "object": "event",
            "api_version": "2025-09-30.clover",
            "created": int(time.time()),
            "type": event_type,
            "livemode": False,
            "data": {"object": dict(session)},
        }
        body = json.dumps(event).encode()
        timestamp = int(time.time()) if timestamp is None else timestamp
        mac = hmac.new((secret or self.WEBHOOK_SECRET).encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
        return body, {"Stripe-Signature": f"t={timestamp},v1={mac.hexdigest()}"}
