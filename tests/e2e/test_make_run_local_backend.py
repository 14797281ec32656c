"""`CONSOLE_LOCAL_BACKEND=1 make run` in the fresh clone: a newcomer launches on "This host", opens
JupyterLab, serves a page from a notebook and shares it, as the README says. User content is on the
instance's own origin (``<label>.apps.localhost:<port>``, which browsers send to the loopback address by
themselves), never the console's: there the console's session is neither sent nor usable. The step
times go to the test log (pytest -s shows them).
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import free_port
from tests.e2e.flow import (
    Steps,
    newcomer_first_session,
    open_jupyterlab,
    open_link_from_the_mailbox,
    origin_of,
    serve_a_page_from_a_notebook,
    share_a_port,
)

pytestmark = [pytest.mark.e2e, pytest.mark.local, pytest.mark.timeout(900)]
SHARED_TEXT = "Hello from my instance"
# What a page can learn with the visitor's credentials from a URL: "blocked" when the browser refuses
# it (another origin that allows none), else the status and the start of the body.
FETCH = """async (url) => {
  try {
    const r = await fetch(url, {credentials: "include"});
    return "status " + r.status + " " + (await r.text()).slice(0, 200);
  } catch (e) { return "blocked"; }
}"""


def console_session_is_not_there(console: Page, content: Page, base_url: str) -> None:
    """From the console's page the session reads the account's API tokens (so the checks can fail);
    from the instance's origin the browser neither sends the console's cookies nor lets a script use them."""
    tokens = base_url + "api/v1/account/tokens/"
    assert console.evaluate(FETCH, tokens).startswith("status 200"), "the console's own page must read its API"
    console_cookies = {c["name"] for c in console.context.cookies(base_url)}
    assert console_cookies, "the console's page must have set its cookies"
    readable = set(re.findall(r"([^=;\s]+)=", content.evaluate("document.cookie")))
    sent = {c["name"] for c in content.context.cookies(content.url)}
    assert not (readable | sent) & console_cookies, (readable, sent, console_cookies)
    from_content = content.evaluate(FETCH, tokens)
    assert from_content == "blocked" or from_content.startswith(("status 401", "status 403")), from_content
    # Nor is the console's API served on the instance's host, where the page's own requests go.
    same_origin = content.evaluate(FETCH, "/api/v1/account/tokens/")
    assert not same_origin.startswith("status 200"), same_origin


def test_a_newcomer_opens_jupyterlab_and_shares_a_port_on_the_instances_own_origin(made_run_local, chromium, shots):
    base_url = made_run_local.url
    console_port = urlsplit(base_url).port
    instance_origin = re.compile(rf"http://[a-z0-9-]+\.apps\.localhost:{console_port}")
    seen: dict[str, str] = {}

    def while_running(page: Page, steps: Steps) -> None:
        lab = open_jupyterlab(page)
        seen["lab"] = origin_of(lab.url)
        assert instance_origin.fullmatch(seen["lab"]), lab.url
        assert urlsplit(seen["lab"]).hostname != urlsplit(base_url).hostname
        lab.screenshot(path=str(shots / "jupyterlab.png"))
        steps.done("open JupyterLab")

        console_session_is_not_there(page, lab, base_url)
        steps.done("check the console's session stays home")

        port = free_port()
        serve_a_page_from_a_notebook(lab, port=port, text=SHARED_TEXT)
        lab.close()
        steps.done("serve a page from a notebook")

        link = share_a_port(page, port=port)
        seen["share"] = origin_of(link)
        page.screenshot(path=str(shots / "ports.png"), full_page=True)
        steps.done("share the port")

        visitor = chromium.new_context()  # someone else's browser: never signed in
        try:
            shared = visitor.new_page()
            shared.goto(link)
            expect(shared.get_by_role("heading", name=SHARED_TEXT)).to_be_visible()
            assert origin_of(shared.url) == seen["lab"], (shared.url, seen)
            shared.screenshot(path=str(shots / "shared.png"))
        finally:
            visitor.close()
        steps.done("open the share link signed out")

    page = chromium.new_page(viewport={"width": 1366, "height": 900})
    try:
        times = newcomer_first_session(
            page,
            base_url,
            "jupyter-newcomer@example.com",
            open_link_from_the_mailbox,
            shots,
            region="This host",
            while_running=while_running,
            run_for_ms=0,  # the steps above take seconds, and an H200 costs a fen every 2.4 s
            stop_and_start=False,
            in_chinese=False,
        )
    finally:
        page.screenshot(path=str(shots / "last.png"), full_page=True)
        page.close()
    assert seen["share"] == seen["lab"], seen
    print("\nnewcomer on the local backend, steps (s):", json.dumps(times))
