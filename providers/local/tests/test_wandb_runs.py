"""The W&B run links: the console's hook in an instance's Python (``images/contract/python``) records
the address of each run a program starts, leaves the program's own behaviour and the image's own
``sitecustomize`` alone, and the console reads the record off the tenant's disk without following a
link or blocking on a FIFO, keeping only ``https`` addresses. Plain Python processes, no container."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from console.settings import BASE_DIR
from providers.local.runtime.wandb_runs import RUNS_FILE, TAIL_BYTES, wandb_runs_read

HOOK = BASE_DIR / "images/contract/python"
URL = "https://wandb.ai/lab/demo/runs/abc123"


def _fake_wandb(folder, *, url: str | None = URL, fails: bool = False) -> None:
    """A stand-in for the wandb package: ``init`` returns a run with W&B's public attributes."""
    (folder / "wandb").mkdir(parents=True)
    (folder / "wandb/__init__.py").write_text(
        "class Run:\n"
        f"    url, name, id, entity = {url!r}, 'lucky-run', 'abc123', 'lab'\n"
        "def init(project=None, **kwargs):\n"
        f"    if {fails!r}:\n"
        "        raise RuntimeError('no network')\n"
        "    run = Run()\n"
        "    run.project = project\n"
        "    return run\n"
    )


def _python(tmp_path, code: str, *paths) -> subprocess.CompletedProcess:
    env = {
        "HOME": str(tmp_path / "home"),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(HOOK), *map(str, paths)]),
    }
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def _records(tmp_path) -> list[dict]:
    path = tmp_path.joinpath("home", *RUNS_FILE)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_run_started_with_wandb_init_is_recorded_and_read_back(tmp_path):
    _fake_wandb(tmp_path / "pkgs")
    done = _python(tmp_path, "import wandb; print(wandb.init(project='demo').name)", tmp_path / "pkgs")
    assert done.returncode == 0 and done.stdout.strip() == "lucky-run", done.stderr
    assert [(r["url"], r["name"], r["project"], r["entity"], r["id"]) for r in _records(tmp_path)] == [
        (URL, "lucky-run", "demo", "lab", "abc123")
    ]
    (run,) = wandb_runs_read(tmp_path / "home")
    assert (run["url"], run["host"], run["name"], run["project"]) == (URL, "wandb.ai", "lucky-run", "demo")
    assert isinstance(run["at"], int)


def test_an_offline_run_records_nothing_and_a_failing_init_fails_as_before(tmp_path):
    _fake_wandb(tmp_path / "offline", url=None)
    assert _python(tmp_path, "import wandb; wandb.init()", tmp_path / "offline").returncode == 0
    assert _records(tmp_path) == []
    _fake_wandb(tmp_path / "failing", fails=True)
    failed = _python(tmp_path, "import wandb; wandb.init()", tmp_path / "failing")
    assert failed.returncode == 1 and "RuntimeError: no network" in failed.stderr
    assert _records(tmp_path) == []


def test_the_images_own_sitecustomize_still_runs_and_programs_without_wandb_are_untouched(tmp_path):
    own = tmp_path / "image-site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.IMAGE_SITE = 'ran'\n")
    done = _python(tmp_path, "import sys; print(IMAGE_SITE, 'wandb' in sys.modules)", own)
    assert done.returncode == 0 and done.stdout.split() == ["ran", "False"], done.stderr


def test_the_reader_refuses_links_fifos_and_what_is_not_an_https_address(tmp_path):
    home = tmp_path / "home"
    folder = home.joinpath(*RUNS_FILE[:-1])
    folder.mkdir(parents=True)
    secret = tmp_path / "host-file"
    secret.write_text(json.dumps({"url": "https://evil.example/host-secret"}) + "\n")

    (folder / RUNS_FILE[-1]).symlink_to(secret)  # the file a link to a host file
    assert wandb_runs_read(home) == []
    (folder / RUNS_FILE[-1]).unlink()
    os.mkfifo(folder / RUNS_FILE[-1])  # a FIFO: never opened for a blocking read
    assert wandb_runs_read(home) == []
    (folder / RUNS_FILE[-1]).unlink()

    lines = [
        "not json",
        json.dumps({"url": "javascript:alert(1)"}),
        json.dumps({"url": "http://wandb.ai/plain/http"}),
        json.dumps({"url": "https://wandb.ai/a b"}),
        json.dumps({"url": "https://wandb.ai/x/p/runs/1", "name": "one", "at": True}),
        json.dumps({"url": "https://wandb.ai/x/p/runs/2", "name": {"nested": 1}}),
        json.dumps({"url": "https://wandb.ai/x/p/runs/1", "name": "one again"}),
    ]
    (folder / RUNS_FILE[-1]).write_text("\n".join(lines) + "\n")
    runs = wandb_runs_read(home)
    assert [(r["url"], r["name"], r["at"]) for r in runs] == [
        ("https://wandb.ai/x/p/runs/1", "one again", None),
        ("https://wandb.ai/x/p/runs/2", "", None),
    ]

    (folder / RUNS_FILE[-1]).unlink()
    folder.rmdir()
    folder.symlink_to(tmp_path)  # a folder on the way a link: refused too
    (tmp_path / RUNS_FILE[-1]).write_text(json.dumps({"url": "https://wandb.ai/elsewhere"}) + "\n")
    assert wandb_runs_read(home) == []


@pytest.mark.parametrize("count", [3, 400])
def test_the_reader_keeps_the_newest_within_its_tail(tmp_path, count):
    folder = tmp_path.joinpath(*RUNS_FILE[:-1])
    folder.mkdir(parents=True)
    lines = [json.dumps({"url": f"https://wandb.ai/x/p/runs/{i}", "name": f"run-{i}" + "x" * 40}) for i in range(count)]
    (folder / RUNS_FILE[-1]).write_text("\n".join(lines) + "\n")
    assert (folder / RUNS_FILE[-1]).stat().st_size > TAIL_BYTES or count == 3
    runs = wandb_runs_read(tmp_path, limit=5)
    assert [r["url"].rsplit("/", 1)[1] for r in runs] == [str(i) for i in range(count - 1, max(-1, count - 6), -1)]
