"""gpuctl against a live console (the simulated cloud): profiles for two consoles or accounts, cp to and
from a volume (resuming a partial upload, skipping complete files), logs -f until the instance is
released, with --json on them all."""

from __future__ import annotations

import os

import pytest
from gpuctl import Client, NotFound

pytestmark = pytest.mark.django_db(transaction=True)


def test_profiles_choose_the_console_and_account(console, gpuctl, bob, monkeypatch):
    from accounts.services import api_token_create

    _token, bobs = api_token_create(user=bob, name="gpuctl", expires_at=None)
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0  # "default"
    logged = gpuctl("--json", "--profile", "bob", "login", "--url", console["url"], "--token", bobs, "--team", "lab")
    assert logged.code == 0 and logged.json()["profile"] == "bob"
    assert (
        logged.json()["config"].endswith("config.toml") and oct(os.stat(logged.json()["config"]).st_mode)[-3:] == "600"
    )

    listed = gpuctl("--json", "profile", "list").json()
    assert [(row["name"], row["team"], row["current"]) for row in listed] == [
        ("bob", "lab", False),
        ("default", None, True),
    ]
    assert "bob" not in str([row.get("token") for row in listed])  # tokens are never listed

    # The same command as each account: by --profile, by GPUCTL_PROFILE, by the saved default.
    gpuctl(
        "--json", "launch", "--gpu", "a800-80g", "--region", "cn-north-1", "--image", "pytorch-2.5-cu124", "--no-wait"
    )
    assert len(gpuctl("--json", "ls").json()) == 1
    assert gpuctl("--json", "--profile", "bob", "ls").json() == []
    monkeypatch.setenv("GPUCTL_PROFILE", "bob")
    assert gpuctl("--json", "ls").json() == []
    monkeypatch.delenv("GPUCTL_PROFILE")
    assert gpuctl("--json", "profile", "use", "bob").code == 0
    assert gpuctl("--json", "ls").json() == []
    assert gpuctl("--json", "profile", "use", "nobody").code == 3
    assert gpuctl("--json", "profile", "rm", "bob").code == 0
    assert len(gpuctl("--json", "ls").json()) == 1  # the remaining profile is the default again
    assert gpuctl("--json", "--profile", "bob", "ls").code == 5  # a profile that is not there: not logged in


def test_cp_to_and_from_a_volume_resumes_and_skips_what_is_complete(console, gpuctl, settings, tmp_path):
    from instances.tests.conftest import backends

    settings.PROVISIONING_BACKENDS = backends(VOLUMES_DIR=str(tmp_path / "volumes"))
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    sdk = Client(console["url"], console["token"])
    volume = sdk.volumes_create({"name": "datasets", "region": "cn-north-1", "size_gb": 1}, idempotency_key="v1")
    again = sdk.volumes_create({"name": "datasets", "region": "cn-north-1", "size_gb": 1}, idempotency_key="v1")
    assert again["id"] == volume["id"] and len(list(sdk.volumes_list())) == 1  # a retried create creates once
    assert sdk.volumes_get(volume["id"])["status"] == "available"

    data = tmp_path / "run"
    (data / "logs").mkdir(parents=True)
    (data / "weights.bin").write_bytes(os.urandom(2_500_000))
    (data / "logs" / "train.log").write_text("step 1 loss 2.3\n")
    # An earlier upload stopped after 1 MB: the copy goes on from there.
    sdk.volumes_files_mkdir(volume["id"], path="/run")
    sdk.volumes_files_upload(volume["id"], (data / "weights.bin").read_bytes()[:1_000_000], path="/run/weights.bin")

    up = gpuctl("--json", "cp", "-r", str(data), "volume/datasets:/")
    assert up.code == 0, up.stdout + up.stderr
    assert sorted((row["path"], row["outcome"], row["transferred"]) for row in up.json()) == [
        ("/run/logs/train.log", "copied", 16),
        ("/run/weights.bin", "resumed", 1_500_000),
    ]
    assert gpuctl("--json", "cp", "-r", str(data), "volume/datasets:/").json()[0]["outcome"] == "skipped"

    back = tmp_path / "back"
    down = gpuctl("--json", "cp", "-r", f"volume/{volume['id'][:8]}:/run", str(back))
    assert down.code == 0, down.stdout + down.stderr
    assert (back / "weights.bin").read_bytes() == (data / "weights.bin").read_bytes()
    assert (back / "logs" / "train.log").read_text() == "step 1 loss 2.3\n"
    one = gpuctl("cp", "volume/datasets:/run/logs/train.log", str(tmp_path / "one.log"))
    assert one.code == 0 and (tmp_path / "one.log").read_text() == "step 1 loss 2.3\n"
    assert "1 copied" in one.stdout

    missing = gpuctl("--json", "cp", "volume/datasets:/nothing.bin", str(tmp_path))
    assert missing.code == 3 and missing.json()["error"]["code"] == "not_found"
    assert gpuctl("--json", "cp", "-r", str(data), str(back)).code == 2  # two local paths: a usage error
    assert gpuctl("--json", "cp", "volume/datasets:/run", str(back)).code == 1  # a folder without -r
    with pytest.raises(NotFound):
        sdk.volumes_files_stat_get(volume["id"], path="/run/none")


def test_logs_follow_prints_each_event_until_the_instance_is_released(console, gpuctl):
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    launch = (
        "launch",
        "--gpu",
        "a800-80g",
        "--region",
        "cn-north-1",
        "--image",
        "pytorch-2.5-cu124",
        "--name",
        "train",
    )
    assert gpuctl("--json", *launch).code == 0
    assert gpuctl("--json", "rm", "train").code == 0
    followed = gpuctl("--json", "logs", "-f", "train", "--interval", "0.05")
    assert followed.code == 0, followed.stdout + followed.stderr
    lines = [__import__("json").loads(line) for line in followed.stdout.splitlines()]
    assert [line["new"] for line in lines][-1] == "released" and "running" in [line["new"] for line in lines]
    assert gpuctl("--json", "logs", "train").json() == lines  # without -f: the same events, as one list
    people = gpuctl("logs", "train")
    assert "→ running" in people.stdout
