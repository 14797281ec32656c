"""gpuctl images against a live console (the simulated cloud): save an instance as an image and wait for it,
list it, launch from it (its digest pinned), rename it, and delete it: refused while an instance uses it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

LAUNCH = ("launch", "--gpu", "a800-80g", "--region", "cn-north-1")


def test_save_list_launch_from_rename_and_delete(console, gpuctl):
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    box = gpuctl("--json", *LAUNCH, "--image", "pytorch-2.5-cu124", "--name", "box").json()
    assert box["status"] == "running"

    saved = gpuctl("--json", "images", "save", "box", "my-env", "--tag", "v1", "--note", "torch + mine")
    assert saved.code == 0, saved.stdout + saved.stderr
    image = saved.json()
    assert image["status"] == "ready" and image["size_bytes"] > 0 and image["source_instance"] == box["id"]
    assert image["reference"].endswith(f"/my-env@{image['digest']}")
    again = gpuctl("--json", "images", "save", "box", "my-env", "--tag", "v1")
    assert again.code == 4 and again.json()["error"]["code"] == "image_exists"  # a conflict

    listed = gpuctl("--json", "images", "list")
    assert [(row["id"], row["status"]) for row in listed.json()] == [(image["id"], "ready")]
    assert "my-env:v1" in gpuctl("images").stdout  # the table, for people

    launched = gpuctl("--json", *LAUNCH, "--image", image["id"], "--name", "from-image").json()
    assert launched["image"] == image["id"] and launched["image_ref"] == image["reference"]

    renamed = gpuctl("--json", "images", "rename", image["id"], "env-2", "--note", "cleaned")
    assert renamed.code == 0 and (renamed.json()["name"], renamed.json()["note"]) == ("env-2", "cleaned")

    refused = gpuctl("--json", "images", "delete", image["id"])
    assert refused.code == 4 and refused.json()["error"]["code"] == "image_in_use"
    assert gpuctl("--json", "rm", "from-image").code == 0
    assert gpuctl("--json", "images", "delete", image["id"]).code == 0
    assert gpuctl("--json", "images", "list").json() == []
    assert gpuctl("--json", "images", "rename", image["id"], "x").code == 3  # gone: not found
