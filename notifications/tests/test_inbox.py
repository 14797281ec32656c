"""The inbox page, the bell and the API: scoped to their owner (a stranger's line is a 404), read marks,
the unread filter, pagination, and the bell's one COUNT."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from notifications.models import Kind, Notification
from notifications.services import Message, notify


def _tell(user, title="Instance preempted", link="/instances/"):
    return notify(user=user, kind=Kind.PREEMPTED, render=lambda: Message(title=title, body="body"), link=link)[0]


def test_the_bell_counts_unread_in_one_query(alice, alice_client):
    for i in range(3):
        _tell(alice, title=f"n{i}")
    Notification.objects.filter(title="n0").update(read_at="2026-01-01T00:00:00Z")
    baseline = alice_client.get("/account/")  # warm: session, user
    assert baseline.status_code == 200
    with CaptureQueriesContext(connection) as queries:
        page = alice_client.get("/account/").content.decode()
    counts = [q["sql"] for q in queries.captured_queries if "notifications_notification" in q["sql"]]
    assert len(counts) == 1 and "COUNT" in counts[0].upper()
    assert "data-notification-count>2</span>" in page


def test_the_inbox_lists_filters_and_marks_read(alice, alice_client):
    first = _tell(alice, title="First")
    second = _tell(alice, title="Second")
    page = alice_client.get("/notifications/").content.decode()
    assert "First" in page and "Second" in page
    alice_client.post("/notifications/read/", {"id": [first.pk]})
    unread = alice_client.get("/notifications/?unread=1").content.decode()
    assert "Second" in unread and "First" not in unread
    alice_client.post("/notifications/read/", {"all": "1"})
    assert not Notification.objects.filter(user=alice, read_at__isnull=True).exists()
    second.refresh_from_db()
    assert second.read_at is not None
    assert "Nothing unread" in alice_client.get("/notifications/?unread=1").content.decode()


def test_opening_a_line_marks_it_read_and_follows_its_link(alice, alice_client):
    row = _tell(alice, link="/billing/")
    response = alice_client.get(f"/notifications/{row.pk}/")
    assert response.status_code == 302 and response["Location"] == "/billing/"
    row.refresh_from_db()
    assert row.read_at is not None


def test_a_stranger_s_notification_is_a_404(alice, charlie_client, charlie):
    row = _tell(alice)
    assert charlie_client.get(f"/notifications/{row.pk}/").status_code == 404
    assert charlie_client.get(f"/api/v1/notifications/{row.pk}/").status_code == 404
    assert charlie_client.post(f"/api/v1/notifications/{row.pk}/read/").status_code == 404
    charlie_client.post("/notifications/read/", {"id": [row.pk]})  # ignored
    assert charlie_client.post(
        "/api/v1/notifications/read/", {"ids": [row.pk]}, content_type="application/json"
    ).json() == {"marked": 0}
    row.refresh_from_db()
    assert row.read_at is None
    assert "Instance preempted" not in charlie_client.get("/notifications/").content.decode()


def test_the_inbox_is_paginated(alice, alice_client):
    for i in range(25):
        _tell(alice, title=f"line {i:02d}")
    first = alice_client.get("/notifications/").content.decode()
    assert "line 24" in first and "line 04" not in first and "Page 1 of 2" in first
    assert "line 04" in alice_client.get("/notifications/?page=2").content.decode()


def test_the_api_lists_filters_and_marks_read(alice, alice_client):
    first = _tell(alice, title="First")
    _tell(alice, title="Second")
    listed = alice_client.get("/api/v1/notifications/").json()
    assert [n["title"] for n in listed["results"]] == ["Second", "First"]
    assert listed["results"][0]["kind"] == "preempted"
    answer = alice_client.post(f"/api/v1/notifications/{first.pk}/read/").json()
    assert answer["read_at"] is not None
    assert [n["title"] for n in alice_client.get("/api/v1/notifications/?unread=true").json()["results"]] == ["Second"]
    assert alice_client.get("/api/v1/notifications/?unread=maybe").status_code == 400
    marked = alice_client.post("/api/v1/notifications/read/", {"all": True}, content_type="application/json")
    assert marked.json() == {"marked": 1}
    assert alice_client.post("/api/v1/notifications/read/", {}, content_type="application/json").status_code == 400
