"""Webhook deliveries: signed, retried with backoff on failure with every attempt recorded, once only,
never redirected, never to a private address unless allowed."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError

from notifications.models import Kind, WebhookAttempt, WebhookDelivery
from notifications.services import Message, notify, webhook_backoff_s, webhook_deliver, webhook_endpoint_create
from notifications.tasks import webhook_deliver_task
from notifications.webhooks import SIGNATURE_HEADER, signature, signature_verify


def _event(user) -> WebhookDelivery:
    notify(
        user=user, kind=Kind.LOW_BALANCE, render=lambda: Message(title="Low", body="Top up"), data={"balance_fen": 5}
    )
    return WebhookDelivery.objects.get(endpoint__user=user)


def test_a_delivery_is_signed_so_the_receiver_can_verify_it(alice, receiver, django_capture_on_commit_callbacks):
    endpoint = webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        delivery = _event(alice)
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.DELIVERED and delivery.attempts == 1
    headers, body = receiver.requests[0]
    assert signature_verify(secret=endpoint.secret, header=headers[SIGNATURE_HEADER.lower()], body=body)
    assert not signature_verify(secret="whsec_wrong", header=headers[SIGNATURE_HEADER.lower()], body=body)
    assert not signature_verify(secret=endpoint.secret, header=headers[SIGNATURE_HEADER.lower()], body=body + b" ")
    payload = json.loads(body)
    assert payload["type"] == "low_balance" and payload["id"] == str(delivery.event_id)
    assert payload["data"] == {"title": "Low", "body": "Top up", "link": "", "balance_fen": 5}
    assert headers["console-event-id"] == str(delivery.event_id)


def test_the_readme_recipe_verifies_a_signature():
    """The README's few lines for receivers, run as written, accept our signature and refuse a change."""
    readme = (Path(settings.BASE_DIR) / "README.md").read_text()
    section = readme[readme.index("### Notifications") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102  (our own README)
    secret, body = "whsec_x", b'{"id":"1"}'
    header = signature(secret=secret, timestamp=int(time.time()), body=body)
    assert namespace["verify"](secret, header, body)
    assert not namespace["verify"](secret, header, body + b" ")
    old = signature(secret=secret, timestamp=int(time.time()) - 301, body=body)
    assert not namespace["verify"](secret, old, body)  # too old: a replay
    assert not signature_verify(secret=secret, header=old, body=body)


def test_a_500_is_retried_with_backoff_and_each_attempt_recorded(alice, receiver, django_capture_on_commit_callbacks):
    receiver.answers = [500, 503]
    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        delivery = _event(alice)  # eager: the retries run at once
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.DELIVERED
    assert delivery.attempts == 3 and delivery.status_code == 200
    attempts = list(WebhookAttempt.objects.filter(delivery=delivery).values_list("number", "status_code"))
    assert attempts == [(1, 500), (2, 503), (3, 200)]
    assert all(a.duration_ms >= 0 for a in WebhookAttempt.objects.filter(delivery=delivery))
    assert "503" in WebhookAttempt.objects.get(delivery=delivery, number=2).error
    # The same event each time (a receiver drops repeats by its id), signed afresh.
    assert len({json.loads(body)["id"] for _, body in receiver.requests}) == 1
    assert [webhook_backoff_s(n) for n in (1, 2, 3)] == [30, 60, 120] and webhook_backoff_s(20) == 3600


def test_it_gives_up_after_the_last_attempt(alice, receiver, settings, django_capture_on_commit_callbacks):
    settings.NOTIFICATIONS_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.answers = [500] * 10
    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        delivery = _event(alice)
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.FAILED and delivery.attempts == 3
    assert len(receiver.requests) == 3


def test_a_repeated_task_posts_nothing_more(alice, receiver, django_capture_on_commit_callbacks):
    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        delivery = _event(alice)
    assert webhook_deliver_task.apply(args=[delivery.pk]).get() == "done"
    assert webhook_deliver(delivery_id=delivery.pk) == "done"
    assert len(receiver.requests) == 1


def test_a_redirect_is_not_followed(alice, receiver, settings, django_capture_on_commit_callbacks):
    settings.NOTIFICATIONS_WEBHOOK_MAX_ATTEMPTS = 1
    receiver.answers = [302]
    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        delivery = _event(alice)
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.FAILED and delivery.status_code == 302
    assert len(receiver.requests) == 1  # and nothing went to the Location


def test_private_addresses_are_refused_for_good_unless_allowed(
    alice, receiver, settings, django_capture_on_commit_callbacks
):
    webhook_endpoint_create(user=alice, url=receiver.url)
    settings.NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE = False  # production's setting: SSRF guard on
    with django_capture_on_commit_callbacks(execute=True):
        delivery = _event(alice)
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.FAILED and delivery.attempts == 1  # not retried
    assert "private or reserved" in delivery.error
    assert receiver.requests == []


@pytest.mark.parametrize("address", ["10.0.0.5", "169.254.169.254", "192.168.1.1", "[::1]", "100.64.0.1", "0.0.0.0"])  # noqa: S104
def test_the_guard_refuses_each_kind_of_internal_address(address, settings):
    from notifications.webhooks import WebhookRefused, resolve

    settings.NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(WebhookRefused):
        resolve(address.strip("[]"), 443)


def test_urls_must_be_https_except_localhost_outside_production(alice, settings):
    with pytest.raises(ValidationError):
        webhook_endpoint_create(user=alice, url="http://example.com/hook")
    with pytest.raises(ValidationError):
        webhook_endpoint_create(user=alice, url="https://user:pw@example.com/hook")
    with pytest.raises(ValidationError):
        webhook_endpoint_create(user=alice, url="ftp://example.com/")
    assert webhook_endpoint_create(user=alice, url="http://localhost:9000/hook").url == "http://localhost:9000/hook"
    settings.NOTIFICATIONS_WEBHOOK_ALLOW_HTTP_LOCALHOST = False  # production
    with pytest.raises(ValidationError):
        webhook_endpoint_create(user=alice, url="http://localhost:9000/hook")
    assert webhook_endpoint_create(user=alice, url="https://example.com/hook").secret.startswith("whsec_")
