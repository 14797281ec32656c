"""In Chromium, a volume's "Files" page (a local-backend volume, a directory on this host): alice opens it
from the volume's page, makes a folder, uploads a small file in several chunks with the progress bar,
sees it listed, downloads it whole; a file that would take the volume past its size is refused with a
message saying so, and nothing of it is written. The page fits a 1366 px laptop and a 390 px phone
without scrolling sideways."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import Page, expect

from instances.tests.conftest import catalogue, rich_alice, this_host  # noqa: F401 (fixtures)
from storage import views
from storage.tests.conftest import make_volume

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHUNK = 64 * 1024
NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def test_upload_list_download_and_a_full_volume_refused(
    live_server,
    page: Page,
    this_host,  # noqa: F811
    rich_alice,  # noqa: F811
    sign_in,
    screenshot_dir,
    tmp_path,
    monkeypatch,
):
    monkeypatch.setattr(views, "CHUNK", CHUNK)
    backend = this_host(services=())
    volume = make_volume(rich_alice, region="local", size_gb=1, name="datasets")
    root = backend.runtime.volume_path(volume.key)
    payload = os.urandom(3 * CHUNK + 500)  # four chunks
    source = tmp_path / "train.jsonl"
    source.write_bytes(payload)

    sign_in(page, rich_alice)
    page.set_viewport_size({"width": 1366, "height": 768})
    page.set_default_timeout(30_000)
    page.goto(f"{live_server.url}/storage/{volume.pk}/")
    page.locator("#volume-files-link").click()
    files_url = f"{live_server.url}/storage/{volume.pk}/files/"
    expect(page).to_have_url(files_url)
    expect(page.locator("#files-listing")).to_contain_text("This folder is empty")

    page.once("dialog", lambda dialog: dialog.accept("data"))
    page.locator("#files-new-folder").click()
    page.locator("#files-listing a", has_text="data/").click()
    expect(page.locator("#files-listing")).to_have_attribute("data-path", "/data")

    offsets: list[str] = []
    page.on("request", lambda r: offsets.append(r.url.rsplit("offset=", 1)[-1]) if r.method == "PUT" else None)
    page.locator("#files-pick").set_input_files(str(source))
    expect(page.locator("#files-message")).to_contain_text("Uploaded train.jsonl.")
    expect(page.locator("#files-progress-bar")).to_have_attribute("value", str(len(payload)))
    assert offsets == [str(i * CHUNK) for i in range(4)], offsets
    assert (root / "data" / "train.jsonl").read_bytes() == payload

    row = page.locator("#files-listing tr[data-name='train.jsonl']")
    expect(row).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "volume-files-1366.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS_SCROLL), "the volume's files page scrolls sideways at 1366 px"
    with page.expect_download() as download:
        row.locator("a", has_text="train.jsonl").click()
    assert download.value.suggested_filename == "train.jsonl"
    assert download.value.path().read_bytes() == payload

    # The volume is nearly full: a file that does not fit is refused before a byte of it is written.
    with open(root / "filler.img", "wb") as handle:
        handle.truncate(volume.size_bytes - len(payload) - 1000)
    too_big = tmp_path / "more.bin"
    too_big.write_bytes(os.urandom(2000))
    page.locator("#files-pick").set_input_files(str(too_big))
    expect(page.locator("#files-message")).to_contain_text("datasets is full")
    assert not (root / "data" / "more.bin").exists()
    page.screenshot(path=str(screenshot_dir / "volume-files-full-1366.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(row).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "volume-files-390.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS_SCROLL), "the volume's files page scrolls sideways on a phone"
    expect(row.locator("[data-delete]")).to_be_in_viewport()
