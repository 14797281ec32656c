"""gpuctl against a live console: log in, launch and wait, ls, show, ssh, stop, rm, events, deploy, balance."""

from __future__ import annotations

import pytest

from instances.services import nodes_sync
from instances.tests.conftest import backends

pytestmark = pytest.mark.django_db(transaction=True)

LAUNCH = ("launch", "--gpu", "a800-80g", "--region", "cn-north-1", "--image", "pytorch-2.5-cu124", "--name", "train")


@pytest.fixture
def logged_in(console, gpuctl):
    run = gpuctl("login", "--url", console["url"], "--token", console["token"])
    assert run.code == 0, run.stderr
    assert "alice@example.com" in run.stdout
    return console


def test_launch_waits_until_running_then_ls_show_stop_and_rm(logged_in, gpuctl):
    launched = gpuctl("--json", *LAUNCH)
    assert launched.code == 0, launched.stdout + launched.stderr
    instance = launched.json()
    assert instance["status"] == "running" and instance["name"] == "train"
    assert instance["gpu_model"] == "a800-80g" and instance["gpu_count"] == 1

    listed = gpuctl("--json", "ls")
    assert listed.code == 0 and [row["id"] for row in listed.json()] == [instance["id"]]
    table = gpuctl("ls")
    assert instance["id"][:8] in table.stdout and "running" in table.stdout

    shown = gpuctl("--json", "show", "train")
    assert shown.code == 0 and shown.json()["id"] == instance["id"]
    assert gpuctl("--json", "show", instance["id"][:8]).json()["id"] == instance["id"]

    stopped = gpuctl("--json", "stop", "train")
    assert stopped.code == 0 and stopped.json()["status"] in {"stopping", "stopped"}
    history = gpuctl("--json", "events", "train").json()
    assert [row["new"] for row in history][:1] and "running" in [row["new"] for row in history]

    removed = gpuctl("--json", "rm", "train")
    assert removed.code == 0 and removed.json()["status"] in {"releasing", "released"}
    assert gpuctl("--json", "ls").json() == []


def test_launch_prints_the_entries_for_people(logged_in, gpuctl):
    run = gpuctl(*LAUNCH)
    assert run.code == 0, run.stderr
    assert "train" in run.stdout and "running" in run.stderr.lower()


def test_ssh_prints_the_command_of_the_instance(logged_in, gpuctl):
    instance = gpuctl("--json", *LAUNCH).json()
    run = gpuctl("--json", "ssh", "train")
    expected = instance["entry_points"]["ssh_command"]
    if expected:
        assert run.code == 0 and run.json() == {"ssh_command": expected}
    else:  # the simulated cloud of this test offers no SSH: a clear refusal, not a crash
        assert run.code == 6 and run.json()["error"]["code"] == "no_ssh"


def test_deploy_prints_the_base_url_and_the_key(logged_in, gpuctl):
    run = gpuctl(
        "--json",
        "deploy",
        "llama-3-instruct-chat",
        "--gpu",
        "a800-80g",
        "--region",
        "cn-north-1",
        "--model",
        "meta-llama/Meta-Llama-3-8B-Instruct",
    )
    assert run.code == 0, run.stdout + run.stderr
    body = run.json()
    assert body["app"] == "llama-3-instruct-chat" and body["api_key"]
    assert body["api_base_url"].endswith(f"/i/{body['instance']}/app/v1")
    people = gpuctl("deploy", "llama-3-instruct-chat", "--gpu", "a800-80g", "--region", "cn-north-1")
    assert people.code == 0 and "API key" in people.stdout


def test_balance_and_volumes(logged_in, gpuctl):
    assert gpuctl("--json", "balance").json()["total_fen"] == 1_000_000
    assert "¥10,000.00" in gpuctl("balance").stdout
    assert gpuctl("--json", "volumes").json() == []


def test_refusals_have_exit_codes_and_the_consoles_error(logged_in, gpuctl):
    bad = gpuctl(
        "--json",
        "launch",
        "--gpu",
        "a800-80g",
        "--count",
        "3",
        "--region",
        "cn-north-1",
        "--image",
        "pytorch-2.5-cu124",
    )
    assert bad.code == 1 and "gpu_count" in bad.json()["error"]["fields"]
    missing = gpuctl("--json", "show", "nothing-like-it")
    assert missing.code == 3 and missing.json()["error"]["code"] == "not_found"
    poor = gpuctl("--json", *LAUNCH[:-2], "--count", "8", "--nodes", "2")
    assert poor.code in (1, 4)


def test_a_retried_launch_with_the_same_key_launches_once(logged_in, gpuctl):
    first = gpuctl("--json", *LAUNCH, "--idempotency-key", "k1", "--no-wait").json()
    again = gpuctl("--json", *LAUNCH, "--idempotency-key", "k1", "--no-wait").json()
    assert first["id"] == again["id"] and len(gpuctl("--json", "ls").json()) == 1


def test_without_login_or_with_a_bad_token_it_says_so(console, gpuctl, monkeypatch):
    run = gpuctl("--json", "ls")
    assert run.code == 5 and run.json()["error"]["code"] == "not_logged_in"
    monkeypatch.setenv("GPUCTL_URL", console["url"])
    monkeypatch.setenv("GPUCTL_TOKEN", "not-a-token")
    run = gpuctl("--json", "ls")
    assert run.code == 5


def test_messages_in_chinese(logged_in, gpuctl, monkeypatch):
    monkeypatch.setenv("GPUCTL_LANG", "zh_CN")
    assert "没有实例" in gpuctl("ls").stdout


def test_an_unreachable_console_is_exit_code_7(gpuctl, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCTL_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GPUCTL_TOKEN", "x")
    run = gpuctl("--json", "balance")
    assert run.code == 7 and run.json()["error"]["code"] == "unreachable"


def test_usage_and_quota(logged_in, gpuctl):
    gpuctl("--json", *LAUNCH)
    usage = gpuctl("--json", "usage")
    assert usage.code == 0 and "lines" in usage.json()
    rows = gpuctl("--json", "quota").json()
    assert any(row["gpu_model"] == "a800-80g" and row["used"] == 1 for row in rows)
    asked = gpuctl("--json", "quota", "request", "--gpu", "h800", "--cards", "16", "--reason", "pretraining")
    assert asked.code == 0, asked.stdout
    assert asked.json()["status"] == "pending"


def test_login_through_the_browser_with_a_device_code(console, gpuctl, alice):
    import threading
    import time

    from django.db import connection

    from devicelogin.models import DeviceAuthorization
    from devicelogin.services import device_login_decide

    def confirm_in_the_browser():
        try:
            for _ in range(200):
                pending = DeviceAuthorization.objects.filter(status="pending").first()
                if pending:
                    device_login_decide(authorization=pending, user=alice, approve=True)
                    return
                time.sleep(0.05)
        finally:
            connection.close()

    user = threading.Thread(target=confirm_in_the_browser)
    user.start()
    run = gpuctl("login", "--url", console["url"], "--no-browser")
    user.join()
    assert run.code == 0, run.stdout + run.stderr
    assert "/account/device/?code=" in run.stderr and "alice@example.com" in run.stdout
    assert gpuctl("--json", "balance").json()["total_fen"] == 1_000_000  # the saved token works


def test_version_and_help_need_no_console(gpuctl):
    assert gpuctl("--version").stdout.strip() == "gpuctl, version 0.2.0"
    assert "launch" in gpuctl("--help").stdout


def test_login_read_only_gets_a_token_that_reads_but_cannot_launch(console, gpuctl, alice):
    import threading
    import time

    from django.db import connection

    from accounts.models import APIToken
    from devicelogin.models import DeviceAuthorization
    from devicelogin.services import device_login_decide

    def confirm_in_the_browser():
        try:
            for _ in range(200):
                pending = DeviceAuthorization.objects.filter(status="pending").first()
                if pending:
                    assert pending.scope == "read"  # the page shows it before the user approves
                    device_login_decide(authorization=pending, user=alice, approve=True)
                    return
                time.sleep(0.05)
        finally:
            connection.close()

    user = threading.Thread(target=confirm_in_the_browser)
    user.start()
    run = gpuctl("login", "--url", console["url"], "--no-browser", "--read-only")
    user.join()
    assert run.code == 0, run.stdout + run.stderr
    assert APIToken.objects.filter(user=alice, scope="read").count() == 1
    assert gpuctl("--json", "balance").json()["total_fen"] == 1_000_000  # reading works
    refused = gpuctl("--json", "launch", "--gpu", "a800-80g", "--region", "cn-north-1", "--image", "pytorch-2.5-cu124")
    assert refused.code != 0
    assert "read_only_token" in refused.stdout + refused.stderr


def test_resize_grows_a_running_cluster_and_refuses_a_single_machine(logged_in, gpuctl, settings):
    settings.PROVISIONING_BACKENDS = backends(
        FLEET=[{"region": "cn-north-1", "gpu": "a800-80g", "nodes": 4, "cards": 8}]
    )
    nodes_sync(alias="default")
    launched = gpuctl("--json", *LAUNCH[:-1], "cluster", "--count", "1", "--nodes", "2")
    assert launched.code == 0, launched.stdout + launched.stderr
    assert launched.json()["node_count"] == 2

    grown = gpuctl("resize", "cluster", "--nodes", "4")
    assert grown.code == 0, grown.stdout + grown.stderr
    assert "cluster: 4 nodes, 4 GPUs in all" in grown.stdout
    assert gpuctl("--json", "show", "cluster").json()["node_count"] == 4

    gpuctl("--json", *LAUNCH)
    single = gpuctl("--json", "resize", "train", "--nodes", "2")
    assert single.code != 0 and "resize_not_supported" in single.stdout + single.stderr
