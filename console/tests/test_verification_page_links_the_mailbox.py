"""In development, "Check your inbox" points at the local mailbox, where the newcomer finds the
verification link whole, follows it and lands verified; with real mail it says nothing of the sort."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import User
from console import mail

SIGN_UP = {
    "email": "newcomer@example.com",
    "password1": "a long passphrase 42",
    "password2": "a long passphrase 42",
    "accept_terms": "on",
}


@pytest.fixture
def development(settings, tmp_path):
    settings.CONSOLE_ENV = "development"
    settings.EMAIL_BACKEND = mail.BACKEND
    settings.CONSOLE_DEV_MAILBOX_DIR = tmp_path / "mail"


def test_check_your_inbox_links_the_mailbox_and_the_link_there_verifies(db, development):
    client = Client()
    page = client.post("/accounts/signup/", SIGN_UP, follow=True).content.decode()
    assert "Check your inbox" in page
    assert 'href="/dev/mail/"' in page

    mailbox = client.get("/dev/mail/").content.decode()
    message_url = re.search(r'href="(/dev/mail/[^"]+/)"', mailbox).group(1)
    message = client.get(message_url).content.decode()
    link = re.search(r'href="(http://testserver/accounts/confirm-email/[^"]+/)"', message).group(1)

    confirm_path = link.removeprefix("http://testserver")
    assert client.get(confirm_path).status_code == 200
    client.post(confirm_path)
    assert User.objects.get(email="newcomer@example.com").emailaddress_set.get().verified


def test_with_real_mail_the_page_does_not_mention_a_mailbox(db, settings, mailoutbox):
    settings.CONSOLE_ENV = "development"  # but mail goes out (SMTP in real life; the test outbox here)
    page = Client().post("/accounts/signup/", SIGN_UP, follow=True).content.decode()
    assert "Check your inbox" in page
    assert "/dev/mail/" not in page
    assert len(mailoutbox) == 1
