"""gpuctl snapshots and clone against a live console (the simulated cloud): snapshot an instance and wait
for it, list it, refuse a restore while it runs, restore it once stopped, schedule, clone, delete."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

LAUNCH = ("launch", "--gpu", "a800-80g", "--region", "cn-north-1")


def test_create_list_restore_schedule_clone_and_delete(console, gpuctl):
    logged_in = gpuctl("login", "--url", console["url"], "--token", console["token"])
    assert logged_in.code == 0, logged_in.stdout + logged_in.stderr
    box = gpuctl("--json", *LAUNCH, "--image", "pytorch-2.5-cu124", "--name", "box").json()
    assert box["status"] == "running"

    made = gpuctl("--json", "snapshots", "create", "box", "--name", "before")
    assert made.code == 0, made.stdout + made.stderr
    snapshot = made.json()
    assert snapshot["status"] == "ready" and snapshot["name"] == "before" and snapshot["size_bytes"] > 0
    listed = gpuctl("--json", "snapshots", "list", "box").json()
    assert [(row["id"], row["status"]) for row in listed] == [(snapshot["id"], "ready")]
    assert "before" in gpuctl("snapshots", "list", "box").stdout  # the table, for people

    refused = gpuctl("--json", "snapshots", "restore", snapshot["id"], "--yes")
    assert refused.code == 4 and refused.json()["error"]["code"] == "invalid_state"  # running: stop first
    assert gpuctl("--json", "stop", "box").code == 0
    restored = gpuctl("--json", "snapshots", "restore", snapshot["id"], "--yes")
    assert restored.code == 0, restored.stdout + restored.stderr
    assert restored.json()["restored_at"] is not None

    scheduled = gpuctl("--json", "snapshots", "schedule", "box", "--every", "6", "--keep", "2").json()
    assert (scheduled["every_hours"], scheduled["keep"]) == (6, 2) and scheduled["next_at"]
    assert gpuctl("--json", "snapshots", "schedule", "box", "--every", "0").json()["every_hours"] is None

    cloned = gpuctl("--json", "clone", "box", "--name", "twin", "--snapshot", snapshot["id"])
    assert cloned.code == 0, cloned.stdout + cloned.stderr
    twin = cloned.json()
    assert twin["name"] == "twin" and twin["image"] == box["image"] and twin["region"] == box["region"]

    assert gpuctl("--json", "snapshots", "delete", snapshot["id"]).code == 0
    assert gpuctl("--json", "snapshots", "list", "box").json() == []
    assert gpuctl("--json", "snapshots", "restore", snapshot["id"], "--yes").code == 3  # gone: not found
