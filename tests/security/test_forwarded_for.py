"""A client cannot name its own address with X-Forwarded-For (issue #24).

Only the proxies in ``CONSOLE_TRUSTED_PROXIES`` (loopback by default) may say whom they serve. The
requests here go through the console as the image and the pods serve it: the ASGI application wrapped
as uvicorn wraps it with the flags in ``deploy/Dockerfile`` and ``deploy/kubernetes/console.yaml``,
with the connection's address (the peer) set by the test.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import uvicorn
import yaml
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.test import Client
from uvicorn.main import main as uvicorn_command

from accounts.models import SecurityEvent
from accounts.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)  # the application answers on its own threads

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
OUTSIDER = "203.0.113.9"  # connects straight to the console: not a proxy of ours
FORGED = "127.0.0.1"  # what the outsider claims to be


def dockerfile_command() -> list[str]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("CMD "))
    return json.loads(line.removeprefix("CMD "))


def pod_command() -> list[str]:
    for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / "console.yaml").read_text()):
        if doc and doc["kind"] == "Deployment" and doc["metadata"]["name"] == "console-web":
            return doc["spec"]["template"]["spec"]["containers"][0]["args"]
    raise AssertionError("no console-web Deployment")


@cache
def served_as(argv: tuple[str, ...]):
    """The console's ASGI application wrapped as ``uvicorn <argv>`` wraps it (its proxy-header handling)."""
    params = uvicorn_command.make_context("uvicorn", list(argv[1:])).params
    config = uvicorn.Config(
        params["app"],
        proxy_headers=params["proxy_headers"],
        forwarded_allow_ips=params["forwarded_allow_ips"],
        log_config=None,
    )
    config.load()
    return config.loaded_app


def request(app, *, method: str, path: str, peer: str, headers: dict[str, str]) -> tuple[int, bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *((k.lower().encode(), v.encode()) for k, v in headers.items())],
        "client": (peer, 40000),
        "server": ("127.0.0.1", 8000),
    }

    async def go() -> tuple[int, bytes]:
        talk = ApplicationCommunicator(app, scope)
        await talk.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await talk.receive_output(60)
        body = b""
        while True:
            message = await talk.receive_output(60)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await talk.send_input({"type": "http.disconnect"})
        return start["status"], body

    return async_to_sync(go)()


DEPLOYED = pytest.mark.parametrize("command", [dockerfile_command, pod_command], ids=["image", "pod"])


@DEPLOYED
def test_a_forged_forwarded_for_does_not_pass_the_metrics_allow_list(command, settings):
    settings.CONSOLE_METRICS_TOKEN = ""
    app = served_as(tuple(command()))
    status, _ = request(app, method="GET", path="/metrics", peer=OUTSIDER, headers={"X-Forwarded-For": FORGED})
    assert status == 404
    # The same scrape from the machine itself is let in: the allow-list works, the header did not.
    status, body = request(app, method="GET", path="/metrics", peer="127.0.0.1", headers={})
    assert status == 200 and b"console_" in body


@DEPLOYED
def test_a_forged_forwarded_for_does_not_change_the_security_log_s_address(command, alice):
    _token, secret = api_token_create(user=alice, name="laptop", expires_at=None)
    other, _ = api_token_create(user=alice, name="old", expires_at=None)
    app = served_as(tuple(command()))
    status, _ = request(
        app,
        method="DELETE",
        path=f"/api/v1/account/tokens/{other.pk}/",
        peer=OUTSIDER,
        headers={"Authorization": f"Bearer {secret}", "X-Forwarded-For": "198.51.100.66"},
    )
    assert status == 204
    event = SecurityEvent.objects.get(user=alice, action=SecurityEvent.Action.TOKEN_REVOKED)
    assert event.ip == OUTSIDER


def test_a_trusted_proxy_s_forwarded_for_names_the_client(alice):
    """nginx on loopback (the default trusted proxy) forwards for a client: that client is logged."""
    _token, secret = api_token_create(user=alice, name="laptop", expires_at=None)
    other, _ = api_token_create(user=alice, name="old", expires_at=None)
    app = served_as(tuple(dockerfile_command()))
    status, _ = request(
        app,
        method="DELETE",
        path=f"/api/v1/account/tokens/{other.pk}/",
        peer="127.0.0.1",
        headers={"Authorization": f"Bearer {secret}", "X-Forwarded-For": "10.9.9.9, 198.51.100.66"},
    )
    assert status == 204
    # The rightmost hop is what our proxy saw; what the client wrote to the left of it is its own claim.
    assert SecurityEvent.objects.get(user=alice, action=SecurityEvent.Action.TOKEN_REVOKED).ip == "198.51.100.66"


def test_a_forged_forwarded_for_does_not_change_the_per_ip_rate_limit_key():
    """The anonymous API throttle (60 a minute per address) counts one outsider however it signs."""
    client = Client(REMOTE_ADDR=OUTSIDER)
    statuses = [
        client.post(
            "/api/v1/account/device/token/",
            {"device_code": "unknown"},
            content_type="application/json",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n % 250}",
        ).status_code
        for n in range(61)
    ]
    assert 429 not in statuses[:60]
    assert statuses[60] == 429


def test_nginx_overwrites_forwarded_for_instead_of_appending_to_the_client_s():
    conf = (DEPLOY / "nginx.conf").read_text()
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in conf
    assert "$proxy_add_x_forwarded_for" not in conf


def test_the_image_and_the_pods_believe_forwarded_for_from_no_one_but_the_console_s_list():
    for command in (dockerfile_command(), pod_command()):
        assert "*" not in command
        assert "--no-proxy-headers" in command


@pytest.mark.parametrize(("peer", "secure"), [(OUTSIDER, False), ("127.0.0.1", True)])
def test_only_a_trusted_proxy_can_say_the_request_came_over_https(settings, peer, secure):
    from django.http import HttpResponse
    from django.test import RequestFactory

    from core.proxies import TrustedProxyMiddleware

    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")  # as production sets it
    seen = {}

    def view(request):
        seen["secure"] = request.is_secure()
        return HttpResponse()

    request = RequestFactory().get("/", REMOTE_ADDR=peer, HTTP_X_FORWARDED_PROTO="https")
    TrustedProxyMiddleware(view)(request)
    assert seen["secure"] is secure
