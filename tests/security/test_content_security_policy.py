"""Every console page carries a Content-Security-Policy that allows no inline script, no eval and no
third-party origin, and no template relies on what it forbids: a script injected into a page by a bug
(or an author's markup that slipped through) runs nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends, fund, running

TEMPLATES = Path(settings.BASE_DIR) / "templates"
STATIC_JS = Path(settings.BASE_DIR) / "static/js"

MAIN_PAGES = [
    "/",
    "/accounts/login/",
    "/dashboard/",
    "/instances/",
    "/instances/launch/",
    "/instances/{instance}/",
    "/billing/",
    "/billing/budget/",
    "/storage/",
    "/apps/",
    "/quota/",
    "/account/",
    "/notifications/",
    "/api/docs/",
]


def directives(header: str) -> dict[str, list[str]]:
    parts = (part.split() for part in header.split(";") if part.strip())
    return {part[0]: part[1:] for part in parts}


def assert_strict(header: str | None, page: str) -> None:
    assert header, f"{page}: no Content-Security-Policy"
    policy = directives(header)
    assert policy["script-src"] == ["'self'"], page
    assert policy["default-src"] == ["'self'"], page
    assert policy["object-src"] == ["'none'"], page
    assert policy["base-uri"] == ["'self'"], page
    assert policy["frame-ancestors"] == ["'none'"], page
    assert "'unsafe-inline'" not in policy["style-src"] + policy.get("style-src-elem", ["'self'"]), page
    for values in policy.values():  # nothing from anywhere else
        assert all(v.startswith("'") or v in ("data:", "blob:") for v in values), (page, values)


@pytest.fixture
def instance(alice, settings):
    settings.PROVISIONING_BACKENDS = backends()
    catalogue_seed()
    fund(alice, 1_000_000)
    return running(alice, name="csp")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("page", MAIN_PAGES)
def test_every_main_page_carries_a_strict_content_security_policy(page, alice, alice_client, instance):
    path = page.format(instance=instance.pk)
    client = alice_client if page != "/accounts/login/" else alice_client.__class__()
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    assert_strict(response.headers.get("Content-Security-Policy"), path)


def test_the_admin_and_the_api_reference_carry_one_too(client, db):
    for path in ("/admin/login/", "/api/redoc/"):
        response = client.get(path, follow=True)
        assert response.headers.get("Content-Security-Policy"), path
    redoc = directives(client.get("/api/redoc/").headers["Content-Security-Policy"])
    assert redoc["script-src"] == ["'self'"]  # Redoc's relaxation is for its styles and worker only


# --- what the policy forbids, nothing relies on -------------------------------------------------------------


def template_files() -> list[Path]:
    return sorted(TEMPLATES.rglob("*.html"))


def test_no_template_has_an_inline_script():
    inline = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
    found = [
        f"{path.relative_to(TEMPLATES)}: {m.group(0)}"
        for path in template_files()
        for m in inline.finditer(path.read_text())
    ]
    assert not found, found


def test_no_template_has_an_inline_event_handler_or_a_javascript_url():
    handler = re.compile(r"""\s(on[a-z]+|hx-on[:\-a-z]*)\s*=|javascript:|hx-vals\s*=\s*['"]\s*js:""", re.I)
    found = [
        f"{path.relative_to(TEMPLATES)}: {m.group(0)}"
        for path in template_files()
        for m in handler.finditer(path.read_text())
    ]
    assert not found, found


def test_htmx_is_told_not_to_eval_nor_to_write_a_style_element():
    base = (TEMPLATES / "base.html").read_text()
    assert """<meta name="htmx-config" content='{"allowEval": false, "includeIndicatorStyles": false}'>""" in base
    assert base.index('name="htmx-config"') < base.index("htmx.min.js")


def test_no_console_script_evaluates_strings():
    pattern = re.compile(r"\beval\(|new Function\(|setTimeout\(\s*['\"]|setInterval\(\s*['\"]")
    found = [path.name for path in STATIC_JS.glob("*.js") if pattern.search(path.read_text())]
    assert not found, found
