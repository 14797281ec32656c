"""Structured logs: every request has an id (answered in X-Request-ID), carried into the Celery tasks
it enqueues, and LOG_FORMAT=json writes one JSON object a line with both ids."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from celery import Celery
from celery.app.trace import build_tracer
from django.http import HttpResponse
from django.test import Client, RequestFactory

from console.logs import (
    REQUEST_ID,
    TASK_ID,
    ContextFilter,
    JsonFormatter,
    RequestIdMiddleware,
    _carry_request_id,
    _enter_task,
    _leave_task,
)

# A Celery app of its own on an in-memory broker: a real publish, a real message, Celery's own worker
# path (the tracer), without touching the console's broker.
PROBE = Celery("log-probe", broker="memory://", set_as_current=False)
LINES: list[dict] = []


@PROBE.task(name="log_probe.polled")
def polled() -> None:
    LINES.append(_line("polled"))


def _line(message: str) -> dict:
    record = logging.LogRecord("console.test", logging.WARNING, __file__, 1, message, None, None)
    ContextFilter().filter(record)
    return json.loads(JsonFormatter().format(record))


def test_every_response_names_its_request(db):
    response = Client().get("/healthz")
    assert len(response["X-Request-ID"]) == 32
    assert Client().get("/healthz", HTTP_X_REQUEST_ID="lb-7f3a.01")["X-Request-ID"] == "lb-7f3a.01"
    assert Client().get("/healthz", HTTP_X_REQUEST_ID="<script>")["X-Request-ID"] != "<script>"


def test_a_json_line_carries_the_ids():
    token = REQUEST_ID.set("req-1")
    try:
        line = _line("stopping %s")
    finally:
        REQUEST_ID.reset(token)
    assert line["level"] == "WARNING" and line["logger"] == "console.test" and line["message"] == "stopping %s"
    assert line["request_id"] == "req-1" and "task_id" not in line
    assert line["time"].endswith("+00:00")


def test_a_task_enqueued_in_a_request_logs_with_the_request_s_id():
    headers: dict = {}
    token = REQUEST_ID.set("req-42")
    try:
        _carry_request_id(headers=headers)  # the web process publishes the task
    finally:
        REQUEST_ID.reset(token)
    assert headers == {"request_id": "req-42"}
    # The worker: Celery puts a message's custom headers on task.request.
    task = SimpleNamespace(request=SimpleNamespace(request_id=headers["request_id"]))
    _enter_task(task_id="task-9", task=task)
    try:
        line = _line("polled")
    finally:
        _leave_task()
        REQUEST_ID.set("")
    assert (line["request_id"], line["task_id"]) == ("req-42", "task-9")
    assert TASK_ID.get() == ""


def test_the_next_task_in_the_worker_does_not_inherit_the_last_one_s_request_id():
    carried = SimpleNamespace(request=SimpleNamespace(request_id="req-42"))
    _enter_task(task_id="task-1", task=carried)
    _leave_task()
    _enter_task(task_id="task-2", task=SimpleNamespace(request=SimpleNamespace()))  # from beat: no request
    try:
        line = _line("swept")
    finally:
        _leave_task()
    assert line["task_id"] == "task-2" and "request_id" not in line
    assert (REQUEST_ID.get(), TASK_ID.get()) == ("", "")


def test_an_eager_task_inside_a_request_keeps_the_request_s_id_and_gives_it_back():
    token = REQUEST_ID.set("req-7")
    try:
        _enter_task(task_id="task-3", task=SimpleNamespace(request=SimpleNamespace()))
        line = _line("eager")
        _leave_task()
        assert (line["request_id"], line["task_id"]) == ("req-7", "task-3")
        assert (REQUEST_ID.get(), TASK_ID.get()) == ("req-7", "")
    finally:
        REQUEST_ID.reset(token)


def test_outside_a_request_nothing_is_added_to_a_task():
    headers: dict = {}
    _carry_request_id(headers=headers)
    assert headers == {}


def test_a_request_s_id_travels_in_the_published_message_into_the_worker_s_log_lines():
    def view(request):
        polled.apply_async(queue="log-probe")
        return HttpResponse("queued")

    answer = RequestIdMiddleware(view)(RequestFactory().get("/", HTTP_X_REQUEST_ID="req-99"))
    assert answer["X-Request-ID"] == "req-99"
    with PROBE.connection_for_read() as connection:
        queue = connection.SimpleQueue("log-probe")
        message = queue.get(timeout=30)
        headers, (args, kwargs, _embed) = dict(message.headers), message.decode()
        queue.close()
    assert headers["request_id"] == "req-99"
    LINES.clear()
    build_tracer(polled.name, polled, app=PROBE, eager=False)(headers["id"], args, kwargs, request=headers)
    assert [(line["request_id"], line["task_id"]) for line in LINES] == [("req-99", headers["id"])]
    assert (REQUEST_ID.get(), TASK_ID.get()) == ("", "")  # the worker's next task starts clean
