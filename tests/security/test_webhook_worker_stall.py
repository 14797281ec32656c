"""One user cannot stall the Celery workers through webhooks (issue #24).

A delivery ends at its overall deadline however slowly the receiver answers; webhook and mail tasks
go to queues of their own; every task has a time limit; "Send test event" is limited per user.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from console.celery import app
from notifications import services, webhooks
from notifications.webhooks import WebhookTransient

DRIP_FOR_S = 30  # the receiver's whole answer takes this long: far past the deadline the test sets


class DrippingReceiver:
    """A receiver on loopback that answers "200 OK" and then one header byte every half second, so
    no single read ever waits long enough to trip a socket timeout."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.client_hung_up = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                ends = time.monotonic() + DRIP_FOR_S
                while time.monotonic() < ends:
                    conn.sendall(b"a")
                    time.sleep(0.5)
                conn.sendall(b"\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                self.client_hung_up.set()
                return
            # Reaching here, the client waited for the whole answer: the bug this file guards against.

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def dripping_receiver(settings):
    settings.NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE = True
    receiver = DrippingReceiver()
    yield receiver
    receiver.close()


def test_a_receiver_dripping_its_answer_is_cut_off_at_the_overall_deadline(dripping_receiver, settings):
    settings.NOTIFICATIONS_WEBHOOK_READ_TIMEOUT_S = 10  # never trips: a byte comes every half second
    settings.NOTIFICATIONS_WEBHOOK_DEADLINE_S = 3
    with pytest.raises(WebhookTransient, match="within 3"):
        webhooks.post(url=dripping_receiver.url, body=b"{}", headers={"Content-Type": "application/json"})
    # The receiver sees the connection go: nothing is left holding the worker.
    assert dripping_receiver.client_hung_up.wait(60)


def _queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name, args=(), kwargs={})["queue"].name


def test_webhook_and_mail_tasks_go_to_queues_of_their_own(settings):
    assert _queue_of(services.DELIVER_TASK) == settings.CELERY_WEBHOOKS_QUEUE == "webhooks"
    assert _queue_of(services.EMAIL_TASK) == settings.CELERY_MAIL_QUEUE == "mail"
    # Everything else stays on the default queue, which the notify and images workers never serve.
    assert _queue_of("instances.tasks.instance_provision_task") == settings.CELERY_TASK_DEFAULT_QUEUE
    assert settings.CELERY_TASK_DEFAULT_QUEUE not in {"webhooks", "mail"}


def test_image_and_disk_copies_go_to_a_queue_of_their_own_with_time_limits_that_fit(settings):
    copies = (
        "instances.tasks.image_save_task",
        "instances.tasks.image_build_task",
        "instances.tasks.snapshot_create_task",
        "instances.tasks.snapshot_restore_task",
    )
    for name in copies:
        assert _queue_of(name) == settings.CELERY_IMAGES_QUEUE == "images", name
    assert settings.CELERY_TASK_DEFAULT_QUEUE != "images"
    app.loader.import_default_modules()
    build = app.tasks["instances.tasks.image_build_task"]
    # The builder stops a build at its timeout: the task outlives it, and the push after it, unkilled.
    assert build.soft_time_limit >= settings.INSTANCES_IMAGE_BUILD_TIMEOUT_S + settings.INSTANCES_IMAGE_BUILD_GRACE_S
    assert build.soft_time_limit > app.conf.task_time_limit
    for name in copies[:1] + copies[2:]:
        assert app.tasks[name].soft_time_limit == settings.INSTANCES_DISK_COPY_TIME_LIMIT_S > app.conf.task_time_limit


def test_every_task_has_a_soft_and_a_hard_time_limit():
    app.loader.import_default_modules()
    ours = {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}
    assert len(ours) > 30
    for name, task in ours.items():
        soft = task.soft_time_limit or app.conf.task_soft_time_limit
        hard = task.time_limit or app.conf.task_time_limit
        assert soft and hard and soft < hard, name
    # A delivery's attempt is leased on its row; the task is killed before the lease ends, so the sweep
    # never starts a second attempt beside a running one.
    assert app.tasks[services.DELIVER_TASK].time_limit < services.ATTEMPT_LEASE_S
    assert app.tasks[services.EMAIL_TASK].time_limit < services.ATTEMPT_LEASE_S


def test_sending_test_events_is_limited_per_user(alice, bob, client_for):
    alice_endpoint = services.webhook_endpoint_create(user=alice, url="http://127.0.0.1:9/hook")
    bob_endpoint = services.webhook_endpoint_create(user=bob, url="http://127.0.0.1:9/hook")
    alice_client = client_for(alice)
    url = f"/api/v1/notifications/webhooks/{alice_endpoint.pk}/test/"
    answers = [alice_client.post(url).status_code for _ in range(5)]
    assert answers == [202] * 5
    refused = alice_client.post(url)
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert refused.json()
    # Bob's own limit is untouched by Alice's.
    bob_url = f"/api/v1/notifications/webhooks/{bob_endpoint.pk}/test/"
    assert client_for(bob).post(bob_url).status_code == 202


def test_the_page_s_send_test_button_shares_the_limit(alice, client_for):
    endpoint = services.webhook_endpoint_create(user=alice, url="http://127.0.0.1:9/hook")
    client = client_for(alice)
    for _ in range(5):
        client.post(f"/api/v1/notifications/webhooks/{endpoint.pk}/test/")
    before = endpoint.deliveries.count()
    client.post(f"/notifications/webhooks/{endpoint.pk}/test/")
    assert endpoint.deliveries.count() == before
