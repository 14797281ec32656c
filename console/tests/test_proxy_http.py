"""HTTP through the instance proxy to a real JupyterLab: the owner gets in, nobody else learns it exists."""

from __future__ import annotations

import httpx
import pytest

from console.tests.conftest import session_cookie

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]


def _secret(world, key):
    return world.runtime.upstream(key, "lab").secret


def test_the_owner_gets_the_jupyterlab_page(proxy_world, alice):
    proxy_world.own(proxy_world.alice_key, alice)
    response = httpx.get(proxy_world.url(proxy_world.alice_key, "lab/lab"), cookies=session_cookie(alice))
    assert response.status_code == 200
    assert "JupyterLab" in response.text
    assert _secret(proxy_world, proxy_world.alice_key) not in response.text
    assert not any(_secret(proxy_world, proxy_world.alice_key) in v for v in response.headers.values())


def test_the_bare_instance_path_redirects_under_the_prefix(proxy_world, alice):
    proxy_world.own(proxy_world.alice_key, alice)
    response = httpx.get(proxy_world.url(proxy_world.alice_key, "lab"), cookies=session_cookie(alice))
    assert response.status_code == 302
    assert response.headers["location"] == f"/i/{proxy_world.alice_key}/lab/"
    # Jupyter's own redirect (/lab/ → /lab/lab or the like) stays under the prefix and carries no token.
    response = httpx.get(proxy_world.url(proxy_world.alice_key, "lab/"), cookies=session_cookie(alice))
    assert response.status_code in (301, 302)
    assert response.headers["location"].startswith(f"/i/{proxy_world.alice_key}/lab/")
    assert "token" not in response.headers["location"]


def test_the_owner_can_use_the_rest_api_with_a_same_origin_post(proxy_world, alice):
    proxy_world.own(proxy_world.alice_key, alice)
    cookies = session_cookie(alice)
    url = proxy_world.url(proxy_world.alice_key, "lab/api/contents")
    body = {"type": "file", "format": "text", "content": "x" * 300_000}  # a large body streams through
    response = httpx.put(f"{url}/big.txt", json=body, cookies=cookies, headers={"Origin": proxy_world.base_url})
    assert response.status_code in (200, 201), response.text
    got = httpx.get(f"{url}/big.txt", params={"content": "1"}, cookies=cookies)
    assert got.status_code == 200 and len(got.json()["content"]) == 300_000
    home = proxy_world.runtime.paths(proxy_world.alice_key).home
    assert (home / "big.txt").stat().st_size == 300_000


def test_a_cross_site_post_is_refused(proxy_world, alice):
    proxy_world.own(proxy_world.alice_key, alice)
    response = httpx.post(
        proxy_world.url(proxy_world.alice_key, "lab/api/kernels"),
        json={"name": "python3"},
        cookies=session_cookie(alice),
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403


def test_a_stranger_gets_404(proxy_world, alice, charlie):
    proxy_world.own(proxy_world.alice_key, alice)
    for path in ("lab/", "lab/lab", "lab/api/kernels", "lab", "code/"):
        response = httpx.get(proxy_world.url(proxy_world.alice_key, path), cookies=session_cookie(charlie))
        assert response.status_code == 404, path
        assert response.text == "Not found."


def test_an_anonymous_visitor_gets_404_not_a_login_redirect(proxy_world, alice):
    proxy_world.own(proxy_world.alice_key, alice)
    response = httpx.get(proxy_world.url(proxy_world.alice_key, "lab/lab"))
    assert response.status_code == 404
    assert "location" not in response.headers


def test_an_unknown_instance_looks_like_a_strangers(proxy_world, alice):
    response = httpx.get(proxy_world.url("0" * 8, "lab/"), cookies=session_cookie(alice))
    assert response.status_code == 404
    assert response.text == "Not found."


def test_two_users_cannot_reach_each_others_servers(proxy_world, alice, charlie):
    proxy_world.own(proxy_world.alice_key, alice)
    proxy_world.own(proxy_world.charlie_key, charlie)
    alice_cookie, charlie_cookie = session_cookie(alice), session_cookie(charlie)
    assert httpx.get(proxy_world.url(proxy_world.alice_key, "lab/api/status"), cookies=alice_cookie).status_code == 200
    assert (
        httpx.get(proxy_world.url(proxy_world.charlie_key, "lab/api/status"), cookies=charlie_cookie).status_code == 200
    )
    assert (
        httpx.get(proxy_world.url(proxy_world.charlie_key, "lab/api/status"), cookies=alice_cookie).status_code == 404
    )
    assert (
        httpx.get(proxy_world.url(proxy_world.alice_key, "lab/api/status"), cookies=charlie_cookie).status_code == 404
    )
    # Nor by walking out of one's own prefix: the upstream is chosen by the id, never by the path.
    sneaky = f"{proxy_world.base_url}/i/{proxy_world.alice_key}/lab/../../{proxy_world.charlie_key}/lab/api/status"
    response = httpx.get(httpx.URL(sneaky), cookies=alice_cookie)
    assert response.status_code == 404


def test_the_jupyter_token_is_required_upstream_and_never_given_out(proxy_world, alice):
    """The server itself refuses requests without the token, so the proxy is the only way in."""
    proxy_world.own(proxy_world.alice_key, alice)
    upstream = proxy_world.runtime.upstream(proxy_world.alice_key, "lab")
    direct = httpx.get(f"http://127.0.0.1:{upstream.port}/i/{proxy_world.alice_key}/lab/api/kernels")
    assert direct.status_code == 403
    through = httpx.get(proxy_world.url(proxy_world.alice_key, "lab/api/kernels"), cookies=session_cookie(alice))
    assert through.status_code == 200
    assert upstream.secret not in through.text
