"""In a real browser: search-as-you-type swaps the results in place, and changing the model redraws the fit table."""

import os
import shutil

import pytest
from django.conf import settings
from django.test import Client

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed"),
]


@pytest.fixture
def browser_page(live_server, alice):
    from apps_marketplace.loaders import marketplace_catalogue_load
    from instances.catalogue import catalogue_seed

    catalogue_seed()
    marketplace_catalogue_load()
    client = Client()
    client.force_login(alice)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; Django must not take it for async code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        context = browser.new_context()
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}])
        page = context.new_page()
        page.set_default_timeout(10_000)
        yield page
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def test_typing_in_the_search_box_filters_the_models_without_a_reload(browser_page, live_server):
    page = browser_page
    page.goto(f"{live_server.url}/apps/models/")
    page.evaluate("window.__marker = 'same page'")
    page.fill("#catalogue-search", "codegeex4")
    page.wait_for_function("() => document.querySelectorAll('#results tbody tr').length === 1")
    assert "codegeex4-all-9b" in page.inner_text("#results")
    assert page.evaluate("window.__marker") == "same page"  # swapped in place, not navigated
    assert "q=codegeex4" in page.url  # and the address can be shared


def test_choosing_the_70b_model_redraws_the_fit_table(browser_page, live_server):
    page = browser_page
    page.goto(f"{live_server.url}/apps/llama-3-instruct-chat/")
    assert "Deploy" in page.inner_text("main")
    page.select_option("form.filters select[name=model]", "meta-llama/Meta-Llama-3-70B-Instruct")
    page.wait_for_function("() => document.querySelector('#app-command').textContent.includes('Meta-Llama-3-70B')")
    cheapest = page.inner_text(".fit-table tr.cheapest")
    assert "A800 80GB" in cheapest and "¥3.80" in cheapest
