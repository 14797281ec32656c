"""A user's own ports: declared on the page or in the API, served to the owner alone through the proxy
(HTTP and WebSocket), and made public by share links that stop working once revoked or expired."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from console.tests.conftest import session_cookie
from core.user_content import content_host
from ports.models import InstancePort, PortShare
from ports.services import port_declare, share_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_owner_declares_a_port_in_the_api_and_reaches_it_alone(
    alice_instance, alice, charlie, client_for, console_url, user_server
):
    api = client_for(alice).post(
        f"/api/v1/instances/{alice_instance.pk}/ports/", {"port": user_server, "name": "TensorBoard"}
    )
    assert api.status_code == 201, api.content
    url = api.json()["url"]
    assert url == f"/i/{alice_instance.pk}/p{user_server}/"

    owner = httpx.get(f"{console_url}{url}data?run=1", cookies={**session_cookie(alice), "theirs": "kept"}, timeout=10)
    assert owner.status_code == 200
    # Served at "/" upstream, with the user's own cookies but never the console's session.
    assert owner.text.startswith("path=/data?run=1 cookie=theirs=kept")
    assert "sessionid" not in owner.text

    assert httpx.get(f"{console_url}{url}", cookies=session_cookie(charlie), timeout=10).status_code == 404
    assert httpx.get(f"{console_url}{url}", timeout=10).status_code == 404
    undeclared = f"{console_url}/i/{alice_instance.pk}/p{user_server + 1}/"
    assert httpx.get(undeclared, cookies=session_cookie(alice), timeout=10).status_code == 404


def test_websockets_reach_a_declared_port(alice_instance, alice, console_url, ws_server):
    port_declare(instance=alice_instance, port=ws_server, name="Gradio")
    url = f"{console_url.replace('http', 'ws')}/i/{alice_instance.pk}/p{ws_server}/queue/join"
    cookie = "; ".join(f"{k}={v}" for k, v in session_cookie(alice).items())

    async def talk():
        async with ws_connect(url, additional_headers={"Cookie": cookie, "Origin": console_url}) as ws:
            await ws.send("hello")
            return await ws.recv()

    assert asyncio.run(talk()) == "echo hello from /queue/join"

    async def stranger():
        async with ws_connect(url, additional_headers={"Origin": console_url}):
            pass

    with pytest.raises(InvalidStatus) as refused:
        asyncio.run(stranger())
    assert refused.value.response.status_code == 404


def test_a_share_link_works_for_anyone_until_it_is_revoked(alice_instance, alice, client_for, console_url, user_server):
    client = client_for(alice)
    port = client.post(f"/api/v1/instances/{alice_instance.pk}/ports/", {"port": user_server}).json()
    made = client.post(f"/api/v1/instances/{alice_instance.pk}/ports/{port['id']}/shares/", {"label": "demo for Bob"})
    assert made.status_code == 201
    share = made.json()
    assert share["status"] == "active" and share["label"] == "demo for Bob"
    assert share["url"].startswith(f"/i/{alice_instance.pk}/s-")

    public = httpx.get(f"{console_url}{share['url']}hello", timeout=10)  # no session at all
    assert public.status_code == 200
    assert public.text.startswith("path=/hello")

    listed = client.get(f"/api/v1/instances/{alice_instance.pk}/ports/").json()
    assert [s["url"] for s in listed[0]["shares"]] == [share["url"]]

    revoked = client.post(f"/api/v1/instances/{alice_instance.pk}/ports/{port['id']}/shares/{share['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    assert httpx.get(f"{console_url}{share['url']}hello", timeout=10).status_code == 404


def test_an_expired_share_link_is_a_404(alice_instance, console_url, user_server):
    port = port_declare(instance=alice_instance, port=user_server)
    share = share_create(port=port, expires_at=timezone.now() + timedelta(hours=1))
    assert httpx.get(f"{console_url}{share.url}", timeout=10).status_code == 200
    PortShare.objects.filter(pk=share.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert httpx.get(f"{console_url}{share.url}", timeout=10).status_code == 404
    guessed = f"{console_url}/i/{alice_instance.pk}/s-{'a' * 32}/"
    assert httpx.get(guessed, timeout=10).status_code == 404


def test_the_page_offers_a_share_link_to_copy_as_a_full_url(alice_instance, alice, client_for, settings):
    """Copied out of the page into a chat, the link opens as it is: scheme, the instance's own host, path."""
    settings.CONSOLE_PROXY_HOST = "apps.localhost:8000"
    share = share_create(port=port_declare(instance=alice_instance, port=6006))
    card = client_for(alice).get(f"/instances/{alice_instance.pk}/ports/").content.decode()
    shown = f"http://{content_host(alice_instance.pk)}{share.path}"
    assert f'<code id="share-url-{share.pk}">{shown}</code>' in card


def test_the_page_adds_a_port_makes_and_revokes_a_share_link(alice_instance, alice, client_for):
    client = client_for(alice)
    page = client.get(f"/instances/{alice_instance.pk}/").content.decode()
    assert f'hx-get="/instances/{alice_instance.pk}/ports/"' in page

    card = client.post(
        f"/instances/{alice_instance.pk}/ports/add/", {"port": "6006", "name": "TensorBoard"}, HTTP_HX_REQUEST="true"
    )
    assert card.status_code == 200
    assert f"/i/{alice_instance.pk}/p6006/" in card.content.decode()
    port = InstancePort.objects.get(instance=alice_instance, port=6006)

    card = client.post(
        f"/instances/{alice_instance.pk}/ports/{port.pk}/shares/",
        {"label": "Bob", "expires_in_hours": "24"},
        HTTP_HX_REQUEST="true",
    )
    share = PortShare.objects.get(port=port)
    assert share.expires_at is not None and share.label == "Bob"
    assert share.url in card.content.decode()

    card = client.post(
        f"/instances/{alice_instance.pk}/ports/{port.pk}/shares/{share.pk}/revoke/", HTTP_HX_REQUEST="true"
    )
    share.refresh_from_db()
    assert share.revoked_at is not None
    assert "Revoked" in card.content.decode()
    assert share.url not in card.content.decode()  # the dead link is no longer offered to copy


def test_bad_input_is_a_form_error_or_a_400_and_a_strangers_instance_a_404(alice_instance, alice, charlie, client_for):
    client = client_for(alice)
    api = f"/api/v1/instances/{alice_instance.pk}/ports/"
    too_big = client.post(api, {"port": 70000})
    assert too_big.status_code == 400 and "port" in too_big.json()["error"]["fields"]
    assert client.post(api, {"port": 8888}).status_code == 201
    twice = client.post(api, {"port": 8888})
    assert twice.status_code == 400
    assert "already served" in twice.json()["error"]["fields"]["port"][0]

    card = client.post(f"/instances/{alice_instance.pk}/ports/add/", {"port": "0"}, HTTP_HX_REQUEST="true")
    assert card.status_code == 200 and 'role="alert"' in card.content.decode()

    stranger = client_for(charlie)
    assert stranger.get(api).status_code == 404
    assert stranger.post(api, {"port": 9000}).status_code == 404
    port = InstancePort.objects.get(instance=alice_instance, port=8888)
    assert stranger.delete(f"{api}{port.pk}/").status_code == 404
    assert stranger.post(f"/instances/{alice_instance.pk}/ports/{port.pk}/remove/").status_code == 404
    assert client.delete(f"{api}{port.pk}/").status_code == 204
    assert not InstancePort.objects.filter(pk=port.pk).exists()


def test_the_card_says_whether_a_port_answers(alice_instance, alice, client_for, user_server):
    from providers.local.tests.local_helpers import free_port

    client = client_for(alice)
    served = port_declare(instance=alice_instance, port=user_server)
    silent = port_declare(instance=alice_instance, port=free_port())
    card = client.get(f"/instances/{alice_instance.pk}/ports/").content.decode()
    assert f"/instances/{alice_instance.pk}/ports/{served.pk}/state/" in card
    answering = client.get(f"/instances/{alice_instance.pk}/ports/{served.pk}/state/").content.decode()
    assert "Answering" in answering and "Not answering" not in answering
    assert "Not answering" in client.get(f"/instances/{alice_instance.pk}/ports/{silent.pk}/state/").content.decode()


LAUNCH = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124"}


def test_ports_asked_for_at_launch_are_served_in_the_api_and_the_form(alice_instance, alice, client_for):
    client = client_for(alice)
    made = client.post("/api/v1/instances/", {**LAUNCH, "ports": [7860, 6006]}, content_type="application/json")
    assert made.status_code == 201, made.content
    listed = client.get(f"/api/v1/instances/{made.json()['id']}/ports/").json()
    assert [p["port"] for p in listed] == [6006, 7860]

    bad = client.post("/api/v1/instances/", {**LAUNCH, "ports": [70000]}, content_type="application/json")
    assert bad.status_code == 400 and "ports" in bad.json()["error"]["fields"]

    form = {"region": alice_instance.region_id, "gpu_model": alice_instance.gpu_model_id, "gpu_count": 1,
            "node_count": 1, "image": alice_instance.image_id, "disk_gb": 50, "name": "tb", "ports": "6006, 8888"}  # fmt: skip
    page = client.post("/instances/launch/", form)
    assert page.status_code == 302, page.content.decode()[:2000]
    launched = alice.instances.get(name="tb")
    assert sorted(launched.ports.values_list("port", flat=True)) == [6006, 8888]

    refused = client.post("/instances/launch/", {**form, "name": "bad", "ports": "6006, web"})
    assert refused.status_code == 200
    assert "A port is a number from 1 to 65535." in refused.content.decode()
    assert not alice.instances.filter(name="bad").exists()
