"""/dev/mail/ lists the development mailbox and shows a message with its links whole and clickable;
it answers only in development, and production does not even route it."""

from __future__ import annotations

import pytest
from django.core.mail import send_mail
from django.test import Client
from django.urls import resolve

from console import mail

LINK = "http://testserver/accounts/confirm-email/MQ:1vQxyz:Q2hlY2sgdGhhdCB0aGlzIGxpbmsgc3RheXMgd2hvbGU-abcdefgh/"


@pytest.fixture
def development(settings, tmp_path):
    settings.CONSOLE_ENV = "development"
    settings.EMAIL_BACKEND = mail.BACKEND
    settings.CONSOLE_DEV_MAILBOX_DIR = tmp_path / "mail"


def test_the_mailbox_lists_messages_newest_first(db, development):
    send_mail("Older", "…", None, ["alice@example.com"])
    send_mail("Newer", "…", None, ["charlie@example.com"])
    body = Client().get("/dev/mail/").content.decode()
    assert body.index("Newer") < body.index("Older")
    assert "charlie@example.com" in body


def test_a_message_shows_its_link_whole_and_clickable(db, development):
    send_mail("Confirm", f"Hello from GPU Console!\n\nTo confirm, go to {LINK}\n", None, ["alice@example.com"])
    key = mail.mailbox_list()[0].key
    response = Client().get(f"/dev/mail/{key}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert f'<a href="{LINK}"' in body  # in the list of links, and in the text (urlize)
    assert body.count(f'href="{LINK}"') == 2


def test_a_message_is_shown_escaped(db, development):
    send_mail("<b>Subject</b>", "<script>alert(1)</script> see http://example.com/?a=1&b=2", None, ["a@example.com"])
    key = mail.mailbox_list()[0].key
    body = Client().get(f"/dev/mail/{key}/").content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<b>Subject</b>" not in body
    assert 'href="http://example.com/?a=1&amp;b=2"' in body


def test_an_empty_mailbox_says_what_will_appear(db, development):
    body = Client().get("/dev/mail/").content.decode()
    assert "No mail yet" in body


def test_an_unknown_message_is_a_404(db, development):
    assert Client().get("/dev/mail/00000000000000000000-00000000/").status_code == 404
    assert Client().get("/dev/mail/not-a-key/").status_code == 404


def test_outside_development_the_pages_are_404(db, settings, tmp_path):
    settings.CONSOLE_ENV = "test"
    settings.DEBUG = False
    settings.CONSOLE_DEV_MAILBOX_DIR = tmp_path / "mail"
    settings.EMAIL_BACKEND = mail.BACKEND
    send_mail("Secret", "…", None, ["alice@example.com"])
    key = mail.mailbox_list()[0].key
    assert Client().get("/dev/mail/").status_code == 404
    assert Client().get(f"/dev/mail/{key}/").status_code == 404


def test_production_does_not_route_them_at_all(settings):
    from console.urls import dev_urlpatterns

    assert resolve("/dev/mail/").url_name == "dev_mailbox"  # routed here (CONSOLE_ENV=test), answering 404
    settings.PRODUCTION, settings.CONSOLE_ENV, settings.DEBUG = True, "production", True
    assert dev_urlpatterns() == []
    assert not mail.dev_pages_enabled()
    assert not mail.mailbox_active()
