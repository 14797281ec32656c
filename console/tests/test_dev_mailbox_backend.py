"""The development mailbox backend keeps every message as a file that any process can list, and logs
one line per message with its link whole (the console backend printed it quoted-printable, wrapped)."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.core.mail import EmailMultiAlternatives, send_mail

from console import mail

LINK = "http://127.0.0.1:8000/accounts/confirm-email/MQ:1vQxyz:Q2hlY2sgdGhhdCB0aGlzIGxpbmsgc3RheXMgd2hvbGU-abcdefgh/"


@pytest.fixture
def mailbox(settings, tmp_path):
    settings.EMAIL_BACKEND = mail.BACKEND
    settings.CONSOLE_DEV_MAILBOX_DIR = tmp_path / "mail"
    return tmp_path / "mail"


def test_it_stores_each_message_and_lists_them_newest_first(mailbox):
    send_mail("First", "Hello.", None, ["alice@example.com"])
    send_mail("Second", f"Confirm your address: {LINK}\n\nThanks!", None, ["charlie@example.com"])

    listed = mail.mailbox_list()
    assert [m.subject for m in listed] == ["Second", "First"]
    newest = listed[0]
    assert newest.to == ["charlie@example.com"]
    assert newest.sender == django_settings.DEFAULT_FROM_EMAIL
    assert newest.links == [LINK]  # whole, though longer than a quoted-printable line
    assert LINK in newest.text
    assert newest.date is not None
    assert len(list(mailbox.glob("*.eml"))) == 2
    assert mail.mailbox_get(key=newest.key) == newest


def test_it_logs_one_line_with_the_subject_and_the_whole_link(mailbox, caplog):
    with caplog.at_level(logging.INFO, logger="console.mail"):
        send_mail("[GPU Console] Please confirm your e-mail", f"Open {LINK}.", None, ["alice@example.com"])
    (record,) = [r for r in caplog.records if r.name == "console.mail"]
    line = record.getMessage()
    assert "\n" not in line
    assert "alice@example.com" in line
    assert "[GPU Console] Please confirm your e-mail" in line
    assert f" {LINK} " in line  # the trailing full stop is prose, not part of the link
    key = mail.mailbox_list()[0].key
    assert line.endswith(f"/dev/mail/{key}/)")


def test_a_message_with_an_html_alternative_is_listed_by_its_text(mailbox):
    message = EmailMultiAlternatives("Both", f"Plain: {LINK}", None, ["alice@example.com"])
    message.attach_alternative(f'<p>HTML: <a href="{LINK}">confirm</a></p>', "text/html")
    message.send()
    (stored,) = mail.mailbox_list()
    assert stored.text.startswith("Plain: ")
    assert stored.links == [LINK]


def test_a_message_written_by_another_process_is_listed_here(mailbox):
    """The web server and the Celery worker are separate processes: what one stores, the other lists.
    The other process runs with development's defaults: no EMAIL_HOST, no EMAIL_BACKEND."""
    script = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'console.settings'); django.setup();"
        "from django.core.mail import send_mail;"
        "send_mail('From the worker', 'Your instance stopped.', None, ['alice@example.com'])"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "CONSOLE_ENV": "development",
        "CONSOLE_DEV_MAILBOX_DIR": str(mailbox),
        "CONSOLE_VAR_DIR": str(mailbox.parent / "var"),
        # Named, not reached: sending mail touches neither.
        "DATABASE_URL": "postgres://console@127.0.0.1:5432/console",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
    }
    subprocess.run([sys.executable, "-c", script], cwd=django_settings.BASE_DIR, env=env, check=True, timeout=60)
    assert [m.subject for m in mail.mailbox_list()] == ["From the worker"]


def test_it_keeps_only_the_newest_messages(mailbox, monkeypatch):
    monkeypatch.setattr(mail, "KEEP", 3)
    for n in range(5):
        send_mail(f"Message {n}", "…", None, ["alice@example.com"])
    assert [m.subject for m in mail.mailbox_list()] == ["Message 4", "Message 3", "Message 2"]


def test_an_unknown_or_malformed_key_finds_nothing(mailbox):
    send_mail("Only", "…", None, ["alice@example.com"])
    assert mail.mailbox_get(key="00000000000000000000-00000000") is None
    assert mail.mailbox_get(key="../../etc/passwd") is None


def test_a_mailbox_that_cannot_be_written_fails_loudly_unless_told_not_to(settings, tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    settings.EMAIL_BACKEND = mail.BACKEND
    settings.CONSOLE_DEV_MAILBOX_DIR = blocked
    with pytest.raises(OSError):
        send_mail("Lost", "…", None, ["alice@example.com"])
    assert send_mail("Lost", "…", None, ["alice@example.com"], fail_silently=True) == 0
