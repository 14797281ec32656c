"""A deployment's settings may still name a backend by its path before the providers moved out of the
instances app (``instances.backends.…``): it loads the same class, and the log says what to write
instead, once per process."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils.module_loading import import_string

from console.demo import demo_parts_enabled
from providers import backend_class, get_backend, loader
from providers.simulated.backend import SimulatedBackend

ROOT = Path(__file__).resolve().parents[2]
OLD_SIMULATED = "instances.backends.fake.FakeBackend"


@pytest.fixture(autouse=True)
def fresh_warnings():
    loader._warned.clear()
    yield
    loader._warned.clear()


def warnings_in(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "providers.loader" and r.levelno == logging.WARNING]


@pytest.mark.parametrize(("old", "new"), sorted(loader.DEPRECATED_PATHS.items()))
def test_every_old_path_names_its_class_at_its_new_home(old, new):
    assert backend_class(old) is import_string(new)


def test_a_backend_configured_by_its_old_path_loads_and_the_log_says_what_to_write(settings, caplog):
    settings.PROVISIONING_BACKENDS = {"default": {"BACKEND": OLD_SIMULATED, "OPTIONS": {"BOOT_DELAY_S": 0}}}
    with caplog.at_level(logging.WARNING, logger="providers.loader"):
        backend = get_backend("default")
    assert isinstance(backend, SimulatedBackend)
    assert backend.options == {"BOOT_DELAY_S": 0}
    [warning] = warnings_in(caplog)
    assert OLD_SIMULATED in warning and "providers.simulated.backend.SimulatedBackend" in warning


def test_the_warning_is_logged_once_per_path_not_per_use(caplog):
    with caplog.at_level(logging.WARNING, logger="providers.loader"):
        for _ in range(3):
            backend_class(OLD_SIMULATED)
        backend_class("instances.backends.local.LocalBackend")
    assert len(warnings_in(caplog)) == 2


def test_new_paths_load_without_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="providers.loader"):
        assert backend_class("providers.simulated.backend.SimulatedBackend") is SimulatedBackend
    assert warnings_in(caplog) == []


def test_an_old_path_still_counts_as_the_simulated_cloud(settings):
    # Else production's check --deploy would let a demo cloud through under its old name.
    settings.PROVISIONING_BACKENDS = {"default": {"BACKEND": OLD_SIMULATED, "OPTIONS": {}}}
    assert demo_parts_enabled().cloud == ("default",)


def test_an_old_path_in_console_provisioning_backends_loads_in_a_fresh_process():
    value = {"hpc": {"BACKEND": "instances.backends.slurm.SlurmBackend", "OPTIONS": {"REGION": "hpc-1"}}}
    code = (
        "import django; django.setup(); from providers import get_backend; "
        "backend = get_backend('hpc'); print(type(backend).__module__, backend.region)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "CONSOLE_PROVISIONING_BACKENDS": json.dumps(value),
    }
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["providers.slurm.backend", "hpc-1"]
    assert "instances.backends.slurm.SlurmBackend, which has moved: write providers.slurm.backend.SlurmBackend" in (
        result.stderr
    )
