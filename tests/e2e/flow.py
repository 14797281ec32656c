"""A newcomer's first session, driven through Chromium by what the pages show (shared by the tests).

Every step finds its way by visible text and roles, as a person would; nothing reaches into the
database. ``newcomer_first_session`` returns how long each step took, for the closing notes; what a
test does while the instance runs (open JupyterLab, share a port) are steps of their own below it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import Page, expect

PASSWORD = "a long passphrase 42"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RUN_FOR_MS = 45_000
# A charge of at least one fen (a card's price decides how many).
CHARGED = re.compile(r"-¥(0\.(0[1-9]|[1-9]\d)|[1-9][\d,]*\.\d\d)")
# The simulated cloud boots in SIMULATED_BOOT_DELAY_S (15 s by default) plus a poll or two.
BOOT_TIMEOUT_MS = 90_000


class Steps:
    """Step name → seconds, in order."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._t = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.times[name] = round(now - self._t, 2)
        self._t = now


def _price(text: str) -> float:
    match = re.search(r"¥\s*([\d,]+(?:\.\d+)?)", text)
    assert match, f"no price in {text!r}"
    return float(match.group(1).replace(",", ""))


def open_link_from_the_mailbox(page: Page, email: str) -> None:
    """The development mailbox, linked from the "Check your inbox" page: the newest message's link."""
    page.get_by_role("link", name=re.compile("mailbox", re.I)).first.click()
    page.get_by_role("link", name=re.compile("Confirm", re.I)).first.click()
    expect(page.locator("body")).to_contain_text(email)
    page.get_by_role("link", name=re.compile("confirm-email")).first.click()


def newcomer_first_session(
    page: Page,
    base_url: str,
    email: str,
    open_verification_link: Callable[[Page, str], None],
    shots: Path,
    *,
    region: str = "",
    while_running: Callable[[Page, Steps], None] | None = None,
    run_for_ms: int = RUN_FOR_MS,
    stop_and_start: bool = True,
    in_chinese: bool = True,
) -> dict[str, float]:
    """Sign up, verify, claim the credit, launch the cheapest card (in ``region``, by its name on the launch
    page, when given), do ``while_running``, stop, start, release, find the bill, read it in Chinese."""
    steps = Steps()
    page.set_default_timeout(30_000)
    page.goto(base_url)
    page.locator("header").get_by_role("link", name="Sign up").click()
    page.fill("input[name=email]", email)
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.check("input[name=accept_terms]")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    steps.done("sign up")

    open_verification_link(page, email)
    expect(page.get_by_role("heading", name="Confirm Email Address")).to_be_visible()
    page.get_by_role("button", name="Confirm").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
    steps.done("verify e-mail")

    page.get_by_role("button", name="Claim trial credit").click()
    expect(page.get_by_text("¥10.00").first).to_be_visible()
    page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
    steps.done("claim credit")

    page.get_by_role("link", name="Go to instances").click()
    page.get_by_role("link", name="Launch an instance").first.click()
    expect(page.get_by_role("heading", name="Launch an instance")).to_be_visible()
    cards = page.locator("label.gpu-card")
    if region:
        page.get_by_label(region).check()
        cards = page.locator("label.gpu-card:not(.unavailable)")  # those the region has free
    expect(cards.first).to_be_visible()
    prices = [(_price(cards.nth(i).locator(".gpu-price").inner_text()), i) for i in range(cards.count())]
    cheapest = cards.nth(min(prices)[1])
    cheapest.click()
    expect(page.locator("#price-hour")).not_to_have_text("—")
    page.screenshot(path=str(shots / "launch.png"), full_page=True)
    page.get_by_role("button", name="Launch", exact=True).click()
    expect(page).to_have_url(re.compile(r"/instances/[0-9a-f-]{36}/$"))
    badge = page.locator("#instance-body h1 .badge")
    expect(badge).to_have_text("Provisioning")
    steps.done("launch")

    # Running without a reload: the live channel (or the page's poll) swaps the status and buttons in.
    expect(badge).to_have_text("Running", timeout=BOOT_TIMEOUT_MS)
    expect(page.get_by_role("button", name="Stop", exact=True)).to_be_visible()
    page.screenshot(path=str(shots / "running.png"), full_page=True)
    steps.done("reach running")

    if while_running is not None:
        while_running(page, steps)
    # Billing is per second and rounds to the fen: at the cheapest card's ¥1.32/h a run must last about
    # half a minute to cost one. Keep it running that long, so there is a charge to find afterwards.
    if run_for_ms:
        page.wait_for_timeout(run_for_ms)
        steps.done("keep it running")  # its own step: the stop's figure is the stop alone
    if stop_and_start:
        page.get_by_role("button", name="Stop", exact=True).click()
        expect(badge).to_have_text("Stopped", timeout=BOOT_TIMEOUT_MS)
        expect(page.get_by_role("button", name="Start", exact=True)).to_be_visible()
        expect(page.get_by_role("button", name="Stop", exact=True)).to_have_count(0)
        steps.done("stop")

        page.get_by_role("button", name="Start", exact=True).click()
        expect(badge).to_have_text("Running", timeout=BOOT_TIMEOUT_MS)
        steps.done("start again")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Release", exact=True).click()
    expect(badge).to_have_text("Released", timeout=BOOT_TIMEOUT_MS)
    steps.done("release")

    _open_from_menu(page, "Billing")
    expect(page.get_by_role("heading", name="Billing", exact=True)).to_be_visible()
    usage = page.locator("table tr", has=page.get_by_text("Usage", exact=True)).first
    expect(usage).to_be_visible()
    expect(usage).to_contain_text(re.compile(r"-¥[\d,]+\.\d\d"))
    page.screenshot(path=str(shots / "billing.png"), full_page=True)
    page.get_by_role("link", name="Statements").first.click()
    page.get_by_role("link", name=re.compile(time.strftime("%B %Y"))).first.click()
    expect(page.get_by_role("heading", name=re.compile("Statement for"))).to_be_visible()
    usage_total = page.locator("tr", has=page.get_by_role("rowheader", name="Usage", exact=True))
    expect(usage_total).to_contain_text(CHARGED)
    page.screenshot(path=str(shots / "statement.png"), full_page=True)
    steps.done("find the charge")
    if not in_chinese:
        return steps.times

    # 简体中文: the language menu, then the pages speak Chinese.
    page.locator("#language-select").select_option(label="简体中文")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.goto(base_url + "instances/")
    expect(page.get_by_role("heading", name="实例", exact=True)).to_be_visible()
    page.goto(base_url + "billing/")
    expect(page.locator("nav").first).to_contain_text("费用中心")
    page.screenshot(path=str(shots / "billing-zh.png"), full_page=True)
    steps.done("switch to Chinese")
    return steps.times


# --- Steps while an instance of the local backend runs (real JupyterLab) ------------------------------

# JupyterLab's first load builds its page and starts a kernel: seconds, more on a busy machine.
LAB_TIMEOUT_MS = 60_000


def _open_from_menu(page: Page, name: str) -> None:
    """Follow the sidebar's link ``name``; on a phone the sidebar sits behind the menu button (☰), which
    is pressed first, as a person would."""
    menu = page.get_by_label("Menu").first  # shown only where the sidebar is folded away
    if menu.is_visible():
        menu.click()
    page.locator("nav").get_by_role("link", name=name).first.click()


def open_jupyterlab(page: Page) -> Page:
    """The instance page's "Open JupyterLab": JupyterLab's launcher in a new tab."""
    with page.context.expect_page() as opened:
        page.get_by_role("link", name="Open JupyterLab").click()
    lab = opened.value
    lab.set_default_timeout(LAB_TIMEOUT_MS)
    expect(lab.locator(".jp-LauncherCard").first).to_be_visible(timeout=LAB_TIMEOUT_MS)
    return lab


def serve_a_page_from_a_notebook(lab: Page, *, port: int, text: str) -> None:
    """A new notebook whose first cell writes a page saying ``text`` and serves it on ``port`` (all
    interfaces, as ``python -m http.server`` does). The socket listens before the cell prints."""
    code = (
        "import functools, http.server, pathlib, threading; "
        "site = pathlib.Path('shared-site'); site.mkdir(exist_ok=True); "
        f"(site / 'index.html').write_text('<!doctype html><title>{text}</title><h1>{text}</h1>'); "
        f"server = http.server.ThreadingHTTPServer(('', {port}), "
        "functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))); "
        "threading.Thread(target=server.serve_forever, daemon=True).start(); "
        "print('serving on', server.server_address[1])"
    )
    lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    expect(lab.get_by_text(re.compile(r"\| Idle$"))).to_be_visible(timeout=LAB_TIMEOUT_MS)
    lab.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
    lab.keyboard.insert_text(code)  # as pasted: no auto-closed brackets
    lab.keyboard.press("Shift+Enter")
    expect(lab.locator(".jp-OutputArea-output").first).to_contain_text(f"serving on {port}", timeout=LAB_TIMEOUT_MS)


def share_a_port(page: Page, *, port: int) -> str:
    """On the instance page's "Service ports" card: add ``port``, see it answer, make a share link.
    Returns the link as the page shows it to copy: a full URL, to open as it is anywhere."""
    card = page.locator("#ports")
    card.get_by_label("Port", exact=True).fill(str(port))
    card.get_by_role("button", name="Add a port").click()
    expect(card.locator(f"#port-{port}")).to_contain_text("Answering", timeout=LAB_TIMEOUT_MS)
    card.get_by_role("button", name="Make a share link").click()
    link = card.locator("code[id^=share-url-]").first
    expect(link).to_be_visible()
    url = link.inner_text().strip()
    assert urlsplit(url).scheme in ("http", "https"), f"a share link to copy must be a full URL: {url!r}"
    return url


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
