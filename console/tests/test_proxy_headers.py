"""What the proxy adds, removes and rewrites on the way through (no servers needed)."""

from __future__ import annotations

import asyncio

import pytest

from console.reverse_proxy import (
    REQUEST_DROP,
    InstanceProxyRouter,
    ProxyTarget,
    _rewrite_location,
    _rewrite_set_cookie,
    _upstream_headers,
    origin_allowed,
)

LAB = ProxyTarget(host="127.0.0.1", port=20001, headers=(("Authorization", "token s3cret"),), secrets=("s3cret",))
CODE = ProxyTarget(
    host="127.0.0.1", port=20002, strip_prefix=True, cookies=(("code-server-session", "c0de"),), secrets=("c0de",)
)
MOUNT = "/i/abc/code"


def _scope(headers: dict[str, str], path="/i/abc/lab/api/x", type_="http"):
    return {
        "type": type_,
        "path": path,
        "raw_path": path.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }


def test_the_consoles_cookies_never_go_upstream():
    scope = _scope({"Cookie": "sessionid=abc; csrftoken=def; _xsrf=keep; django_language=zh-hans; theme=dark"})
    cookie = dict(_upstream_headers(scope, LAB, REQUEST_DROP))["Cookie"]
    assert cookie == "_xsrf=keep; theme=dark"


def test_the_upstream_secret_is_added_and_the_browsers_own_attempt_replaced():
    scope = _scope({"Cookie": "code-server-session=forged; sessionid=abc", "Authorization": "token forged"})
    headers = _upstream_headers(scope, CODE, REQUEST_DROP)
    assert dict(headers)["Cookie"] == "code-server-session=c0de"
    assert "Authorization" not in dict(headers)
    lab_headers = _upstream_headers(scope, LAB, REQUEST_DROP)
    assert [v for k, v in lab_headers if k.lower() == "authorization"] == ["token s3cret"]


def test_origin_referer_and_hop_by_hop_headers_are_dropped_and_host_is_the_upstreams():
    scope = _scope(
        {"Origin": "http://console", "Referer": "http://console/x", "Connection": "keep-alive", "Host": "console"}
    )
    headers = dict(_upstream_headers(scope, LAB, REQUEST_DROP))
    assert "Origin" not in headers and "Referer" not in headers and "Connection" not in headers
    assert headers["Host"] == "127.0.0.1:20001"


@pytest.mark.parametrize(
    ("location", "target", "expected"),
    [
        ("http://127.0.0.1:20001/i/abc/lab/tree", LAB, "/i/abc/lab/tree"),
        ("/i/abc/lab/lab?token=s3cret", LAB, "/i/abc/lab/lab?token="),
        ("./login", CODE, "./login"),
        ("/login", CODE, "/i/abc/code/login"),
        ("http://127.0.0.1:20002/?folder=/x", CODE, "/i/abc/code/?folder=/x"),
        ("https://elsewhere.example/", CODE, "https://elsewhere.example/"),
    ],
)
def test_redirects_stay_under_the_prefix_and_carry_no_secret(location, target, expected):
    mount = "/i/abc/lab" if target is LAB else MOUNT
    assert _rewrite_location(location, mount=mount, target=target) == expected


def test_upstream_cookies_are_kept_inside_the_instance_path():
    assert _rewrite_set_cookie("a=1; Path=/; HttpOnly", mount=MOUNT, target=CODE).startswith("a=1;")
    assert "Path=/i/abc/code/" in _rewrite_set_cookie("a=1; Path=/", mount=MOUNT, target=CODE)
    assert "Path=/i/abc/lab/" in _rewrite_set_cookie("_xsrf=2; Path=/i/abc/lab/", mount="/i/abc/lab", target=LAB)
    assert "Path=/i/abc/lab/" in _rewrite_set_cookie("_xsrf=2; Path=/", mount="/i/abc/lab", target=LAB)


def test_an_upstream_cannot_set_the_consoles_cookies():
    assert _rewrite_set_cookie("sessionid=evil; Path=/", mount=MOUNT, target=CODE) is None
    assert _rewrite_set_cookie("csrftoken=evil; Path=/", mount=MOUNT, target=CODE) is None


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://localhost:8000", "localhost:8000", True),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("https://evil.example", "localhost:8000", False),
        ("http://localhost:9999", "localhost:8000", False),  # another port is another origin
        ("http://evil.example", "evil.example", False),  # not one of ALLOWED_HOSTS
        ("null", "localhost:8000", False),
        (None, "localhost:8000", False),
    ],
)
def test_only_the_consoles_own_origin_is_allowed(origin, host, allowed):
    headers = {"Host": host} | ({"Origin": origin} if origin else {})
    assert origin_allowed(_scope(headers)) is allowed


def test_a_trusted_origin_may_be_configured(settings):
    settings.CONSOLE_PROXY_TRUSTED_ORIGINS = ["https://console.example"]
    assert origin_allowed(_scope({"Host": "apps.example", "Origin": "https://console.example"}))


def _route(scope) -> str:
    seen = []

    async def inner(scope, receive, send):
        seen.append("django")

    async def send(message):  # the router's own answer: neither the proxy's nor Django's
        if message["type"] == "http.response.start":
            seen.append(f"router {message['status']}")

    router = InstanceProxyRouter(inner)
    router.proxy = lambda scope, receive, send: _record(seen)
    asyncio.run(router(scope, None, send))
    return seen[0]


async def _record(seen):
    seen.append("proxy")


def test_only_instance_paths_reach_the_proxy(settings):
    assert _route(_scope({}, path="/i/abc/lab/")) == "proxy"
    assert _route(_scope({}, path="/i/abc/code/", type_="websocket")) == "proxy"
    assert _route(_scope({}, path="/instances/")) == "django"
    assert _route(_scope({}, path="/ws/events/", type_="websocket")) == "django"
    assert _route({"type": "lifespan"}) == "django"


def test_a_separate_proxy_host_takes_everything_on_that_host_and_nothing_elsewhere(settings):
    settings.CONSOLE_PROXY_HOST = "apps.example"
    assert _route(_scope({"Host": "apps.example:443"}, path="/i/abc/lab/")) == "proxy"
    assert _route(_scope({"Host": "apps.example"}, path="/accounts/login/")) == "proxy"  # a 404 there
    # On the console's host an instance's path is served by neither: redirected there, or a 404.
    assert _route(_scope({"Host": "console.example"}, path="/i/abc/lab/")) == "router 404"
    instance_path = "/i/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/lab/"
    assert _route(_scope({"Host": "console.example"}, path=instance_path)) == "router 302"
    assert _route(_scope({"Host": "console.example"}, path="/instances/")) == "django"
    # Each instance's own host under that domain, and any other name there (a 404), are the proxy's too.
    assert _route(_scope({"Host": "0123456789abcdef.apps.example:443"}, path="/i/abc/lab/")) == "proxy"
    assert _route(_scope({"Host": "a.b.apps.example"}, path="/")) == "proxy"
    assert _route(_scope({"Host": "apps.example.evil"}, path="/i/abc/lab/")) == "router 404"  # not that domain
