"""The authenticated reverse proxy to instances' user servers: ``/i/<instance-id>/<service>/…``.

Mounted in ``console.asgi`` in front of Django for paths under ``CONSOLE_PROXY_PREFIX``. It carries
HTTP (streamed both ways, never buffered) and WebSocket (relayed frame by frame) to the server that
``console.hooks.proxy_target`` answers (``console/wiring.py``). The resolver is the one seam between the proxy and whatever runs
instances: ``resolve(*, instance_id, service, user, api_key="") -> ProxyTarget | None``; it returns
None unless ``user`` may use that instance (its owner, later a teammate), or ``api_key`` is a key that
opens it (a deployment's, for its app: ``KEY_SERVICES``), and the server has an address.

What the proxy guarantees, whatever the resolver:

- A stranger, an anonymous visitor, a bad id and a stopped instance look the same: 404. Nothing
  tells a stranger that an instance exists.
- WebSocket upgrades, and HTTP requests that can change state, must come from the console's own
  origin (the request's own host, or ``CONSOLE_PROXY_TRUSTED_ORIGINS``): cross-site WebSocket
  hijacking of a logged-in user's servers (CVE-2023-26114 in code-server, CVE-2024-28179 in
  jupyter-server-proxy) is refused with 403 before any upstream is contacted.
- The upstream's own secret (Jupyter's token, code-server's session cookie) is added here, on the
  way up, so it never appears in the browser's URL bar, history, or a Referer sent to a third
  party. The console's own session and CSRF cookies are removed before forwarding, so user code
  never sees them, and upstream responses cannot set cookies with those names.

User servers on hosts of their own (the real isolation of user content from the console's cookies,
and of one instance's content from another's, as JupyterHub's ``subdomain_host`` does per user): set
``CONSOLE_PROXY_HOST`` to a domain; each instance's servers are then at ``<label>.<that domain>``
(``core.user_content.content_host``), one origin per instance. The proxy answers only on that domain (and on
an instance's host, only for that instance's paths), and Django only elsewhere. The console's session
cookie stays host-only (leave ``SESSION_COOKIE_DOMAIN`` unset), so it is never sent to user content;
the browser is signed in on an instance's host by a one-time hand-off from the console that sets that
host's own cookie (``console.proxy_handoff``), and there only that cookie counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from functools import cache
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

import httpx
import websockets
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import validate_host
from websockets.asyncio.client import connect as websocket_connect

from console import proxy_handoff
from console.hooks import port_target, proxy_target
from core.user_content import ProxyTarget, content_host, instance_of_path, label_of_host, path_matches_label, proxy_link

logger = logging.getLogger(__name__)

HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"host",
}
# Content-Length passes both ways: a request body is streamed with its declared length (httpx then
# sends no chunked framing, which some servers refuse for uploads), and a response's raw bytes are
# relayed exactly as the upstream framed them.
# Never forwarded upstream: the browser's own credentials for the upstream are ours to set.
REQUEST_DROP = {b"authorization", b"cookie", b"origin", b"referer", b"forwarded"} | HOP_BY_HOP
WS_REQUEST_DROP = REQUEST_DROP | {
    b"sec-websocket-key",
    b"sec-websocket-version",
    b"sec-websocket-extensions",
    b"sec-websocket-protocol",
}
# Never relayed down: ``Service-Worker-Allowed`` would let a script under one path (a share link's)
# register a service worker over the whole host, and so over every other server of the instance.
RESPONSE_DROP = {b"service-worker-allowed"} | HOP_BY_HOP
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
SERVICES = ("lab", "code", "app", "webui")
# Services a caller may reach with a Bearer key instead of the owner's session (a deployment's API key:
# scripts and OpenAI clients send no cookies). The resolver checks the key; the key never goes upstream.
KEY_SERVICES = ("app",)
_PATH = re.compile(r"^(?P<id>[A-Za-z0-9][A-Za-z0-9-]{0,63})/(?P<service>[a-z][a-z0-9-]{0,40})(?P<rest>/.*)?$")
# A user's own port (``p6006``) or a share link to one (``s-<token>``): ``console.hooks.port_target``
# answers for those (``ports.proxy_targets``); a share link needs no session.
_PORT_SERVICE = re.compile(r"^(p[1-9][0-9]{0,4}|s-[a-z2-7]{32})$")


def is_port_service(service: str) -> bool:
    return bool(_PORT_SERVICE.match(service))


def _prefix() -> str:
    return getattr(settings, "CONSOLE_PROXY_PREFIX", "/i/")


def is_proxy_path(path: str) -> bool:
    return path.startswith(_prefix())


async def resolve(*, instance_id: str, service: str, user, api_key: str = "") -> ProxyTarget | None:
    """The target for the session's ``user``, or, with ``api_key``, for whoever holds that key."""
    if is_port_service(service):
        authenticated = user is not None and getattr(user, "is_authenticated", False)
        return await database_sync_to_async(port_target.get())(
            instance_id=instance_id, service=service, user=user if authenticated else None
        )
    resolver = proxy_target.get()
    if api_key:
        # Only the key decides: a request carrying one is not also granted by the session beside it.
        return await database_sync_to_async(resolver)(
            instance_id=instance_id, service=service, user=None, api_key=api_key
        )
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    # Thread-sensitive, as Channels runs every database call: a resolver that queries the Instance
    # table then holds one connection, not one per worker thread of a pool.
    return await database_sync_to_async(resolver)(instance_id=instance_id, service=service, user=user)


def bearer_key(scope) -> str:
    """The token of an ``Authorization: Bearer …`` header, or ""."""
    scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _headers(scope) -> list[tuple[bytes, bytes]]:
    return list(scope.get("headers") or [])


def _header(scope, name: bytes) -> str | None:
    for key, value in _headers(scope):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def origin_allowed(scope) -> bool:
    """The request comes from a page of the console's own origin (or a trusted one)."""
    origin = _header(scope, b"origin")
    if not origin or origin == "null":
        return False
    trusted = getattr(settings, "CONSOLE_PROXY_TRUSTED_ORIGINS", [])
    if origin in trusted:
        return True
    origin_host = urlsplit(origin).netloc.lower()
    host = (_header(scope, b"host") or "").lower()
    if _on_proxy_host(scope):  # the user-content host's own pages (its name need not be in ALLOWED_HOSTS)
        return origin_host == host
    return bool(host) and origin_host == host and validate_host(host.rsplit(":", 1)[0], settings.ALLOWED_HOSTS)


def _console_cookie_names() -> set[str]:
    """Cookies that are the console's, never user content's: dropped on the way up, refused on the way down."""
    return {
        settings.SESSION_COOKIE_NAME,
        settings.CSRF_COOKIE_NAME,
        settings.LANGUAGE_COOKIE_NAME,
        getattr(settings, "CONSOLE_PROXY_COOKIE_NAME", "console_content"),
    }


def _proxy_host() -> str:
    """The user-content domain's name, without a port; "" when user content is on the console's host."""
    return (getattr(settings, "CONSOLE_PROXY_HOST", "") or "").rsplit(":", 1)[0].lower()


def _content_label(scope) -> str | None:
    """The instance label of the request's host on the user-content domain ("" for the bare domain or
    a label that is no instance's); None off that domain."""
    return label_of_host(_header(scope, b"host") or "")


def _on_proxy_host(scope) -> bool:
    return bool(_proxy_host()) and _content_label(scope) is not None


def _upstream_cookie_header(scope, target: ProxyTarget) -> str:
    """The browser's cookies minus the console's own, plus the upstream's secret cookie."""
    drop = _console_cookie_names() | {name for name, _ in target.cookies}
    kept = []
    for key, value in _headers(scope):
        if key.lower() != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            name = part.split("=", 1)[0].strip()
            if name and name not in drop:
                kept.append(part.strip())
    kept.extend(f"{name}={value}" for name, value in target.cookies)
    return "; ".join(kept)


def _upstream_headers(scope, target: ProxyTarget, drop: set[bytes]) -> list[tuple[str, str]]:
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in _headers(scope) if k.lower() not in drop]
    headers.append(("Host", f"{target.host}:{target.port}"))
    headers.extend(target.headers)
    cookie = _upstream_cookie_header(scope, target)
    if cookie:
        headers.append(("Cookie", cookie))
    return headers


def _split(scope) -> tuple[str, str, str, bytes] | None:
    """(instance id, service, mount prefix, upstream path) or None when the path is not ours."""
    prefix = _prefix()
    if not scope["path"].startswith(prefix):
        return None
    match = _PATH.match(scope["path"][len(prefix) :])
    if not match or (match["service"] not in SERVICES and not is_port_service(match["service"])):
        return None
    mount = f"{prefix}{match['id']}/{match['service']}"
    raw = scope.get("raw_path") or scope["path"].encode()
    if not raw.startswith(mount.encode()):
        return None  # an id spelled with escapes: refuse rather than guess
    return match["id"], match["service"], mount, raw


def _upstream_path(raw: bytes, mount: str, target: ProxyTarget, query: bytes) -> str:
    path = raw[len(mount) :] if target.strip_prefix else raw
    path = path or b"/"
    return path.decode("latin-1") + (("?" + query.decode("latin-1")) if query else "")


def _rewrite_location(value: str, *, mount: str, target: ProxyTarget) -> str:
    for origin in (f"http://{target.host}:{target.port}", f"http://localhost:{target.port}"):
        if value.startswith(origin):
            value = value[len(origin) :] or "/"
            break
    if target.strip_prefix and value.startswith("/") and not value.startswith("//"):
        value = mount + value
    for secret in target.secrets:
        value = value.replace(secret, "")
    return value


def _rewrite_set_cookie(value: str, *, mount: str, target: ProxyTarget) -> str | None:
    """Keep upstream cookies inside the instance's path; never let one replace a console cookie."""
    cookie = SimpleCookie()
    try:
        cookie.load(value)
    except Exception:
        return None
    if not cookie:
        return None
    name = next(iter(cookie))
    if name in _console_cookie_names():
        return None
    path = cookie[name]["path"] or "/"
    if target.strip_prefix:
        path = mount + (path if path.startswith("/") else "/" + path)
    elif not path.startswith(mount):
        path = mount + "/"
    cookie[name]["path"] = path
    cookie[name]["domain"] = ""  # host-only
    return cookie.output(header="").strip()


# --- HTTP -----------------------------------------------------------------------------------------


@cache
def _client_for_loop(loop_id: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=5.0, read=None, write=60.0, pool=10.0),
        follow_redirects=False,
        trust_env=False,  # never through an HTTP(S)_PROXY from the environment
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=40),
    )


def _client() -> httpx.AsyncClient:
    return _client_for_loop(id(asyncio.get_running_loop()))


async def _simple_response(send, status: int, body: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})


NOT_FOUND = "Not found."


async def proxy_http(scope, receive, send) -> None:
    parts = _split(scope)
    if parts is None:
        await _simple_response(send, 404, NOT_FOUND)
        return
    instance_id, service, mount, raw = parts
    api_key = bearer_key(scope) if service in KEY_SERVICES else ""
    # A key is no ambient credential (a page elsewhere cannot make a browser send it), so a request
    # authenticated by one may come from any origin, as API calls do.
    if (
        not api_key
        and scope["method"] in UNSAFE_METHODS
        and _header(scope, b"origin") is not None
        and not origin_allowed(scope)
    ):
        await _simple_response(send, 403, "Cross-origin request refused.")
        return
    target = await resolve(instance_id=instance_id, service=service, user=scope.get("user"), api_key=api_key)
    if target is None:
        await _simple_response(send, 404, NOT_FOUND)
        return
    if raw == mount.encode():  # /i/<id>/lab → /i/<id>/lab/
        await send({"type": "http.response.start", "status": 302, "headers": [(b"location", (mount + "/").encode())]})
        await send({"type": "http.response.body", "body": b""})
        return

    disconnected = asyncio.Event()

    async def body():
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
                return
            if message.get("body"):
                yield message["body"]
            if not message.get("more_body"):
                return

    path = _upstream_path(raw, mount, target, scope.get("query_string", b""))
    request = _client().build_request(
        scope["method"],
        f"http://{target.host}:{target.port}{path}",
        headers=_upstream_headers(scope, target, REQUEST_DROP),
        content=body() if scope["method"] not in ("GET", "HEAD") else None,
    )
    try:
        response = await _client().send(request, stream=True)
    except httpx.HTTPError as exc:
        logger.debug("instance %s %s unreachable: %s", instance_id, service, exc)
        await _simple_response(send, 502, "This server is not answering yet. Wait a moment and reload.")
        return
    try:
        headers = []
        for key, value in response.headers.raw:
            lower = key.lower()
            if lower in RESPONSE_DROP:
                continue
            text = value.decode("latin-1")
            if lower == b"location":
                text = _rewrite_location(text, mount=mount, target=target)
            elif lower == b"set-cookie":
                text = _rewrite_set_cookie(text, mount=mount, target=target)
                if text is None:
                    continue
            headers.append((lower, text.encode("latin-1")))
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})

        async def relay() -> None:
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

        # A long-lived response (an event stream, a long poll) must end when the browser goes away,
        # not when the upstream next writes: whichever finishes first cancels the other.
        streaming = asyncio.create_task(relay())
        watcher = asyncio.create_task(_wait_disconnect(receive, disconnected))
        try:
            await asyncio.wait({streaming, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, watcher):
                task.cancel()
            await asyncio.gather(streaming, watcher, return_exceptions=True)
    finally:
        await response.aclose()


async def _wait_disconnect(receive, disconnected: asyncio.Event) -> None:
    """After the request body is read, the next message can only be the client going away."""
    if disconnected.is_set():
        return
    with contextlib.suppress(Exception):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
                return


# --- WebSocket ------------------------------------------------------------------------------------


async def _ws_refuse(scope, send, status: int) -> None:
    """Refuse the upgrade with an HTTP status where the server allows it (uvicorn does), else 403."""
    if "websocket.http.response" in (scope.get("extensions") or {}):
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": (NOT_FOUND if status == 404 else "").encode()})
    else:
        await send({"type": "websocket.close", "code": 1008})


async def proxy_websocket(scope, receive, send) -> None:
    parts = _split(scope)
    if parts is None:
        await _ws_refuse(scope, send, 404)
        return
    if not origin_allowed(scope):
        await _ws_refuse(scope, send, 403)
        return
    instance_id, service, mount, raw = parts
    target = await resolve(instance_id=instance_id, service=service, user=scope.get("user"))
    if target is None:
        await _ws_refuse(scope, send, 404)
        return
    path = _upstream_path(raw, mount, target, scope.get("query_string", b""))
    headers = [(k, v) for k, v in _upstream_headers(scope, target, WS_REQUEST_DROP) if k.lower() != "host"]
    try:
        upstream = await websocket_connect(
            f"ws://{target.host}:{target.port}{path}",
            additional_headers=headers,
            subprotocols=scope.get("subprotocols") or None,
            origin=None,
            compression=None,
            max_size=None,
            ping_interval=None,  # the browser and the server keep their own liveness
            open_timeout=10,
            proxy=None,
        )
    except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as exc:
        logger.debug("instance %s %s websocket unreachable: %s", instance_id, service, exc)
        await _ws_refuse(scope, send, 502)
        return

    message = await receive()  # websocket.connect
    if message["type"] != "websocket.connect":
        await upstream.close()
        return
    await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})

    async def down_to_up() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                await upstream.close(code=message.get("code", 1000) if message.get("code", 1000) < 4999 else 1000)
                return
            if message.get("bytes") is not None:
                await upstream.send(message["bytes"])
            elif message.get("text") is not None:
                await upstream.send(message["text"])

    async def up_to_down() -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            async for frame in upstream:
                if isinstance(frame, bytes):
                    await send({"type": "websocket.send", "bytes": frame})
                else:
                    await send({"type": "websocket.send", "text": frame})
        code = upstream.close_code or 1000
        with contextlib.suppress(Exception):
            await send({"type": "websocket.close", "code": code if code not in (1005, 1006) else 1000})

    tasks = [asyncio.create_task(down_to_up()), asyncio.create_task(up_to_down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await upstream.close()
        await asyncio.gather(*tasks, return_exceptions=True)


# --- the ASGI application -------------------------------------------------------------------------


def _cookie(scope, name: str) -> str:
    for key, value in _headers(scope):
        if key.lower() == b"cookie":
            for part in value.decode("latin-1").split(";"):
                key_, _, value_ = part.strip().partition("=")
                if key_ == name:
                    return value_
    return ""


async def _handoff(scope, send, *, label: str) -> None:
    """``/i/_handoff?token=…`` on an instance's host: redeem once, set this host's cookie, go on."""
    token = (parse_qs((scope.get("query_string") or b"").decode("latin-1")).get("token") or [""])[0]
    redeemed = await database_sync_to_async(proxy_handoff.handoff_redeem)(token, label=label)
    if redeemed is None:
        await _simple_response(
            send, 403, "This sign-in link was used already or has expired. Open the server again from the console."
        )
        return
    user_id, next_path, session_key = redeemed
    cookie = SimpleCookie()
    name = settings.CONSOLE_PROXY_COOKIE_NAME
    cookie[name] = await database_sync_to_async(proxy_handoff.content_cookie)(
        user_id, session_key=session_key, label=label
    )
    cookie[name]["path"] = "/"
    cookie[name]["httponly"] = True
    cookie[name]["samesite"] = "Lax"
    cookie[name]["max-age"] = settings.CONSOLE_PROXY_COOKIE_AGE_S
    if scope.get("scheme") in ("https", "wss"):
        cookie[name]["secure"] = True
    headers = [
        (b"location", next_path.encode("latin-1")),
        (b"set-cookie", cookie.output(header="").strip().encode("latin-1")),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),  # the token is spent, but keep it out of the next page's Referer
    ]
    await send({"type": "http.response.start", "status": 302, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _not_found(scope, send) -> None:
    if scope["type"] == "websocket":
        await _ws_refuse(scope, send, 404)
    else:
        await _simple_response(send, 404, NOT_FOUND)


async def _proxy_app(scope, receive, send) -> None:
    if _on_proxy_host(scope):
        label = _content_label(scope) or ""
        if scope["type"] == "http" and scope["path"] == f"{_prefix()}_handoff" and label:
            await _handoff(scope, send, label=label)
            return
        if not path_matches_label(scope["path"], label):
            # One origin per instance: another instance's paths (or any, on the bare domain) are not here.
            await _not_found(scope, send)
            return
        # Who the visitor is, on this host, is what its own cookie says: never the console's session.
        # Only while the console session that handed off lasts (its log-out, a password change end it).
        user = await database_sync_to_async(proxy_handoff.content_cookie_user)(
            _cookie(scope, settings.CONSOLE_PROXY_COOKIE_NAME), label=label
        )
        scope = {**scope, "user": user}
    if scope["type"] == "http":
        await proxy_http(scope, receive, send)
    elif scope["type"] == "websocket":
        await proxy_websocket(scope, receive, send)


def content_origin_location(scope) -> str | None:
    """Where ``/i/…`` asked of the console's host goes when user content has hosts of its own: a share
    link straight to its instance's host (it needs no sign-in), any other server through the console's
    hand-off (``/open/``, which signs the browser in there); None for a path that names no instance."""
    parts = _split(scope)
    if parts is None:
        return None
    instance_id, service, _mount, raw = parts
    query = scope.get("query_string") or b""
    try:
        host = content_host(instance_id)
    except ValueError:
        return None
    if service.startswith("s-"):
        return f"//{host}{raw.decode('latin-1')}" + (f"?{query.decode('latin-1')}" if query else "")
    return proxy_link(scope["path"] + (f"?{query.decode('latin-1')}" if query else ""))


async def _to_content_origin(scope, send) -> None:
    """User content is never served on the console's origin, where its scripts could use the console's
    session: an HTTP request there is sent to the instance's own host, a WebSocket refused."""
    location = content_origin_location(scope) if scope["type"] == "http" and instance_of_path(scope["path"]) else None
    if location is None:
        await _not_found(scope, send)
        return
    headers = [(b"location", location.encode("latin-1")), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 302, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


class InstanceProxyRouter:
    """Sends ``/i/…`` (HTTP and WebSocket) to the proxy, with the session user, and the rest to ``app``.

    With a user-content host, the proxy answers only there; ``/i/…`` on the console's host only redirects.
    """

    def __init__(self, app) -> None:
        self.app = app
        self.proxy = AuthMiddlewareStack(_proxy_app)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket") and self._is_ours(scope):
            await self.proxy(scope, receive, send)
        elif scope["type"] in ("http", "websocket") and _proxy_host() and is_proxy_path(scope["path"]):
            await _to_content_origin(scope, send)
        else:
            await self.app(scope, receive, send)

    @staticmethod
    def _is_ours(scope) -> bool:
        if _proxy_host():
            return _on_proxy_host(scope)
        return is_proxy_path(scope["path"])
