"""gpuctl images recipe / build against a live console (the simulated cloud): print a saved image's recipe,
write it to a file, edit it, build a new image from it and wait until it is ready; a recipe from outside
the console's registry is refused with the line that says why; a failed build exits non-zero with its reason."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

LAUNCH = ("launch", "--gpu", "a800-80g", "--region", "cn-north-1")


def test_recipe_edit_and_build(console, gpuctl, settings, tmp_path):
    settings.CONSOLE_REGISTRY = "registry.simulated.invalid"
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    assert gpuctl("--json", *LAUNCH, "--image", "pytorch-2.5-cu124", "--name", "box").json()["status"] == "running"
    image = gpuctl("--json", "images", "save", "box", "my-env", "--tag", "v1").json()

    shown = gpuctl("images", "recipe", image["id"])
    assert shown.code == 0 and f"# Saved as: {image['reference']}" in shown.stdout
    recipe = tmp_path / "Containerfile"
    assert gpuctl("images", "recipe", image["id"], "-o", str(recipe)).code == 0
    assert recipe.read_text() == shown.stdout
    recipe.write_text(f"FROM {image['reference']}\nRUN echo edited > /etc/motd\n")

    built = gpuctl("--json", "images", "build", "-f", str(recipe), "my-env:v2", "--note", "edited")
    assert built.code == 0, built.stdout + built.stderr
    body = built.json()
    assert (body["name"], body["tag"], body["status"], body["note"]) == ("my-env", "v2", "ready", "edited")
    again = gpuctl("images", "recipe", body["id"])
    assert again.stdout == recipe.read_text()

    recipe.write_text("FROM docker.io/library/debian:12\n")
    refused = gpuctl("--json", "images", "build", "-f", str(recipe), "other")
    assert refused.code != 0 and "not an image of this console's registry" in refused.stdout

    recipe.write_text(f"FROM {image['reference']}\nRUN false\n")
    failed = gpuctl("--json", "images", "build", "-f", str(recipe), "broken")
    assert failed.code != 0 and failed.json()["error"]["code"] == "image_build_failed"
