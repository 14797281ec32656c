"""WebSocket through the instance proxy: a real kernel runs code for its owner, and nobody else connects."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from console.tests.conftest import session_cookie

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]

KERNEL_SUBPROTOCOL = "v1.kernel.websocket.jupyter.org"


@pytest.fixture(scope="module")
def kernel(proxy_world):
    """A kernel in alice's JupyterLab, started once for the module (straight at the server: starting
    one through the proxy is what the owner's browser does, tested with the REST API elsewhere)."""
    upstream = proxy_world.runtime.upstream(proxy_world.alice_key, "lab")
    response = httpx.post(
        f"http://127.0.0.1:{upstream.port}/i/{proxy_world.alice_key}/lab/api/kernels",
        json={"name": "python3"},
        headers={"Authorization": f"token {upstream.secret}"},
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _channels_url(world, key, kernel_id):
    return f"{world.ws_base}/i/{key}/lab/api/kernels/{kernel_id}/channels"


def _execute(ws, code: str) -> str:
    msg_id = uuid.uuid4().hex
    ws.send(
        json.dumps(
            {
                "header": {
                    "msg_id": msg_id,
                    "username": "",
                    "session": uuid.uuid4().hex,
                    "msg_type": "execute_request",
                    "version": "5.3",
                },
                "parent_header": {},
                "metadata": {},
                "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {}},
                "channel": "shell",
                "buffers": [],
            }
        )
    )
    output = []
    while True:
        message = json.loads(ws.recv(timeout=30))
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            output.append(message["content"]["text"])
        if message["msg_type"] == "error":
            raise AssertionError(message["content"])
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return "".join(output)


def test_the_owner_runs_code_in_a_kernel_over_the_websocket(proxy_world, alice, kernel):
    proxy_world.own(proxy_world.alice_key, alice)
    with connect(
        _channels_url(proxy_world, proxy_world.alice_key, kernel),
        origin=proxy_world.base_url,
        additional_headers={"Cookie": f"sessionid={session_cookie(alice)['sessionid']}"},
    ) as ws:
        assert _execute(ws, "print(6 * 7)") == "42\n"
        # The kernel sees its GPUs and none of the console's or Jupyter's secrets.
        seen = _execute(
            ws,
            "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'), 'JUPYTER_TOKEN' in os.environ, "
            "'DATABASE_URL' in os.environ, os.getcwd() == os.environ['HOME'])",
        )
        assert seen == "0 False False True\n"


def test_the_subprotocol_is_negotiated_with_the_upstream(proxy_world, alice, kernel):
    proxy_world.own(proxy_world.alice_key, alice)
    with connect(
        _channels_url(proxy_world, proxy_world.alice_key, kernel),
        origin=proxy_world.base_url,
        subprotocols=[KERNEL_SUBPROTOCOL],
        additional_headers={"Cookie": f"sessionid={session_cookie(alice)['sessionid']}"},
    ) as ws:
        assert ws.subprotocol == KERNEL_SUBPROTOCOL


def _refusal(url, *, origin, cookie=None) -> int:
    headers = {"Cookie": f"sessionid={cookie}"} if cookie else {}
    with pytest.raises(InvalidStatus) as refused, connect(url, origin=origin, additional_headers=headers):
        pass
    return refused.value.response.status_code


def test_a_stranger_and_an_anonymous_visitor_get_404(proxy_world, alice, charlie, kernel):
    proxy_world.own(proxy_world.alice_key, alice)
    url = _channels_url(proxy_world, proxy_world.alice_key, kernel)
    assert _refusal(url, origin=proxy_world.base_url, cookie=session_cookie(charlie)["sessionid"]) == 404
    assert _refusal(url, origin=proxy_world.base_url) == 404


def test_a_foreign_origin_is_refused_even_for_the_owner(proxy_world, alice, kernel):
    """Cross-site WebSocket hijacking: evil.example's page opening alice's kernel with her cookies."""
    proxy_world.own(proxy_world.alice_key, alice)
    url = _channels_url(proxy_world, proxy_world.alice_key, kernel)
    cookie = session_cookie(alice)["sessionid"]
    assert _refusal(url, origin="https://evil.example", cookie=cookie) == 403
    assert _refusal(url, origin="null", cookie=cookie) == 403
    assert _refusal(url, origin=None, cookie=cookie) == 403


def test_two_users_cannot_open_each_others_kernels(proxy_world, alice, charlie, kernel):
    proxy_world.own(proxy_world.charlie_key, charlie)
    # alice's kernel id under charlie's instance: charlie's server has no such kernel, and alice
    # cannot use charlie's instance at all.
    url = _channels_url(proxy_world, proxy_world.charlie_key, kernel)
    assert _refusal(url, origin=proxy_world.base_url, cookie=session_cookie(alice)["sessionid"]) == 404
