"""In Chromium, the "Files" page of a running instance against an SSH server standing in for its sshd:
alice makes a folder, uploads a file in chunks while the connection drops twice (once an answer is lost
and the page resumes by itself from the size stat reports; once the page is reloaded mid-upload and the
same file, picked again, resumes where it stopped), then sees it listed, downloads it whole and deletes
it; a file dropped on the page uploads too. The page fits a 1366 px laptop and a 390 px phone without
scrolling sideways."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from gateway import views
from gateway.tests.conftest import catalogue, loop_thread, simulated_cloud, world  # noqa: F401 (fixtures)
from gateway.tests.test_gateway_pass_through import instance_sshd  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHUNK = 256 * 1024
NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def _offset(url: str) -> int:
    return int(parse_qs(urlsplit(url).query)["offset"][0])


def test_an_upload_survives_dropped_connections_then_lists_downloads_and_deletes(
    live_server,
    page: Page,
    world,  # noqa: F811
    instance_sshd,  # noqa: F811
    sign_in,
    screenshot_dir,
    tmp_path,
    monkeypatch,
):
    monkeypatch.setattr(views, "CHUNK", CHUNK)
    instance = world["instance"]
    payload = os.urandom(5 * CHUNK + 1000)  # six chunks
    source = tmp_path / "weights.bin"
    source.write_bytes(payload)
    sent: list[int] = []
    held: list = []

    def drop(route):
        offset = _offset(route.request.url)
        sent.append(offset)
        if offset == CHUNK and sent.count(CHUNK) == 1:
            route.fetch()  # the chunk arrives on the instance, but its answer is lost on the way back
            route.abort("connectionreset")
        elif offset == 3 * CHUNK and not held:
            route.fetch()
            held.append(route)  # the answer never comes: the page is reloaded while it waits
        else:
            route.continue_()

    sign_in(page, world["alice"].user)
    page.set_viewport_size({"width": 1366, "height": 768})
    page.set_default_timeout(30_000)
    page.route("**/files/content/?*", lambda route: drop(route) if route.request.method == "PUT" else route.continue_())
    files_url = f"{live_server.url}/instances/{instance.pk}/files/"
    page.goto(f"{live_server.url}/instances/{instance.pk}/")
    page.locator("#files-panel a", has_text="Open files").click()
    expect(page).to_have_url(files_url)
    expect(page.locator("#files-listing")).to_contain_text("This folder is empty")

    page.once("dialog", lambda dialog: dialog.accept("runs"))
    page.locator("#files-new-folder").click()
    page.locator("#files-listing a", has_text="runs/").click()
    expect(page.locator("#files-listing")).to_have_attribute("data-path", "/runs")
    expect(page).to_have_url(files_url + "?path=/runs")

    # First drop: a lost answer. The page asks stat how much arrived and goes on from there.
    page.locator("#files-pick").set_input_files(str(source))
    for _ in range(600):  # up to 30 s on a busy machine
        if held:
            break
        page.wait_for_timeout(50)
    assert held, f"the upload never reached the fourth chunk (sent {sent})"
    assert sent == [0, CHUNK, 2 * CHUNK, 3 * CHUNK], "the chunk whose answer was lost was sent again"
    assert (instance_sshd / "runs" / "weights.bin").stat().st_size == 4 * CHUNK

    # Second drop: the page is reloaded mid-upload; the same file, picked again, resumes at 4 chunks.
    page.reload()
    expect(page.locator("#files-listing")).to_contain_text("weights.bin")
    page.locator("#files-pick").set_input_files(str(source))
    expect(page.locator("#files-message")).to_contain_text("Uploaded weights.bin.")
    assert sent[4:] == [4 * CHUNK, 5 * CHUNK], f"the upload started over instead of resuming: {sent}"
    assert (instance_sshd / "runs" / "weights.bin").read_bytes() == payload
    expect(page.locator("#files-progress-bar")).to_have_attribute("value", str(len(payload)))

    row = page.locator("#files-listing tr[data-name='weights.bin']")
    expect(row).to_contain_text("1.3\xa0MB")
    page.screenshot(path=str(screenshot_dir / "files-1366.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS_SCROLL), "the files page scrolls sideways at 1366 px"

    with page.expect_download() as download:
        row.locator("a", has_text="weights.bin").click()
    assert download.value.suggested_filename == "weights.bin"
    assert download.value.path().read_bytes() == payload

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(row).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "files-390.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS_SCROLL), "the files page scrolls sideways on a phone"
    expect(row.locator("[data-delete]")).to_be_in_viewport()

    messages: list[str] = []

    def confirm(dialog):
        messages.append(dialog.message)
        dialog.accept()

    page.once("dialog", confirm)
    row.locator("[data-delete]").click()
    expect(page.locator("#files-listing")).to_contain_text("This folder is empty")
    assert messages == ["Delete weights.bin? This cannot be undone."]
    assert not (instance_sshd / "runs" / "weights.bin").exists()

    # A file dropped on the card uploads into the folder shown, as a picked one does.
    page.evaluate(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(["dropped on the card"], "notes.txt", { type: "text/plain" }));
            document.getElementById("files").dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true }));
        }"""
    )
    expect(page.locator("#files-listing tr[data-name='notes.txt']")).to_be_visible()
    assert (instance_sshd / "runs" / "notes.txt").read_text() == "dropped on the card"

    # Picking a file whose name is taken asks first; declining leaves the file on the instance as it was.
    asked: list[str] = []

    def decline(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", decline)
    other = tmp_path / "notes.txt"
    other.write_text("a different file")
    page.locator("#files-pick").set_input_files(str(other))
    expect(page.locator("#files-progress")).to_be_hidden()
    assert asked == ["notes.txt is already here. Replace it?"]
    assert (instance_sshd / "runs" / "notes.txt").read_text() == "dropped on the card"
