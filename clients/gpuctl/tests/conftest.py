"""gpuctl's tests drive the CLI against a live console started by pytest-django (``live_server``).

The package is imported from its source folder, as ``pip install clients/gpuctl`` would install it,
so the tests need no install step; the CLI talks to the console only over HTTP with an API token.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpuctl.cli import cli


@pytest.fixture
def console(live_server, settings, alice, tmp_path, monkeypatch):
    """A live console with the catalogues and a funded alice; gpuctl logged in as her."""
    from accounts.services import api_token_create
    from apps_marketplace.loaders import marketplace_catalogue_load
    from instances.catalogue import catalogue_seed
    from instances.tests.conftest import backends, fund

    settings.PROVISIONING_BACKENDS = backends()
    catalogue_seed()
    marketplace_catalogue_load()
    fund(alice, 1_000_000)
    _token, secret = api_token_create(user=alice, name="gpuctl", expires_at=None)
    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("GPUCTL_POLL_S", "0.05")
    monkeypatch.delenv("GPUCTL_URL", raising=False)
    monkeypatch.delenv("GPUCTL_TOKEN", raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    return {"url": live_server.url, "token": secret}


class Run:
    def __init__(self, result) -> None:
        self.code, self.stdout, self.stderr = result.exit_code, result.stdout, result.stderr

    def json(self):
        return json.loads(self.stdout)


@pytest.fixture
def gpuctl():
    """``gpuctl("--json", "ls")`` → the exit code, stdout and stderr of one run."""
    runner = CliRunner()

    def run(*args: str) -> Run:
        return Run(runner.invoke(cli, list(args), catch_exceptions=False))

    return run
