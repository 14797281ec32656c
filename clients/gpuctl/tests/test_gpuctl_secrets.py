"""gpuctl secrets against a live console: set (from standard input or a file; a second set replaces the
value), list (names, never values), delete, and launch with a secret chosen, with --json."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from gpuctl.cli import cli

pytestmark = pytest.mark.django_db(transaction=True)


def _run(*args: str, stdin: str | None = None):
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout


def test_set_list_replace_delete(console, gpuctl, tmp_path):
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    code, stdout = _run("--json", "secrets", "set", "WANDB_API_KEY", stdin="wandb-secret-1\n")
    assert code == 0 and json.loads(stdout)["size"] == len("wandb-secret-1")  # echo's newline dropped
    key_file = tmp_path / "hf"
    key_file.write_text("hf_longer_token\n")
    code, stdout = _run("--json", "secrets", "set", "WANDB_API_KEY", "--from-file", str(key_file))
    assert code == 0 and json.loads(stdout)["size"] == len("hf_longer_token\n")  # a file is taken whole
    listed = gpuctl("--json", "secrets", "list")
    assert [row["name"] for row in listed.json()] == ["WANDB_API_KEY"]
    assert "hf_longer_token" not in listed.stdout and "wandb-secret-1" not in listed.stdout
    table = gpuctl("secrets", "list")
    assert "WANDB_API_KEY" in table.stdout

    from vault.models import Secret
    from vault.selectors import secret_values_for_boot

    secret = Secret.objects.get()
    assert secret_values_for_boot(owner_id=secret.owner_id, secret_ids=[secret.pk])[secret.pk][1] == "hf_longer_token\n"

    launched = gpuctl(
        "--json",
        "launch",
        "--gpu",
        "a800-80g",
        "--region",
        "cn-north-1",
        "--image",
        "pytorch-2.5-cu124",
        "--no-wait",
        "--secret-env",
        "WANDB_API_KEY",
    )
    assert launched.code == 0, launched.stderr
    from gpuctl import Client

    client = Client(console["url"], console["token"])
    assert client.instances_secrets_list(launched.json()["id"]) == [{"name": "WANDB_API_KEY", "env": True}]

    assert gpuctl("--json", "secrets", "delete", "WANDB_API_KEY").code == 0
    assert gpuctl("--json", "secrets", "list").json() == []
    missing = gpuctl("--json", "secrets", "delete", "WANDB_API_KEY")
    assert missing.code == 3  # not found


def test_a_bad_name_is_refused_with_the_consoles_reason(console, gpuctl):
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    code, _stdout = _run("--json", "secrets", "set", "lower-case", stdin="x")
    assert code == 1
