"""A production console does not fall back to demo parts (issue #24).

With ``CONSOLE_ENV=production`` every process refuses to start while the simulated cloud, the
simulated payment gateway or e-mail that is never sent is enabled, unless ``CONSOLE_DEMO_MODE=1``
says the console is a demo; and the image is a production one unless told otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
REAL_BACKENDS = json.dumps(
    {"default": None, "hpc": {"BACKEND": "providers.slurm.backend.SlurmBackend", "OPTIONS": {"REGION": "hpc"}}}
)
REAL_GATEWAY = {
    "BILLING_PAYMENT_GATEWAY": "billing.gateways.stripe_checkout.StripeGateway",
    "BILLING_GATEWAY_WEBHOOK_SECRET": "whsec-test",
}
REAL_MAIL = {"EMAIL_HOST": "smtp.example.com"}  # named, not reached: `check` sends nothing
DEMO_VARIABLES = {
    "CONSOLE_DEMO_MODE",
    "CONSOLE_PROVISIONING_BACKENDS",
    "BILLING_PAYMENT_GATEWAY",
    "BILLING_EXTRA_PAYMENT_GATEWAYS",
    "CONSOLE_LOCAL_BACKEND",
    "CONSOLE_SLURM_BACKEND",
    "KUBERNETES_BACKEND_OPTIONS",
    "EMAIL_HOST",
    "EMAIL_BACKEND",
}


def production_check(**env: str) -> subprocess.CompletedProcess:
    """``manage.py check`` in a production process with its secrets but none of the demo variables."""
    inherited = {k: v for k, v in os.environ.items() if k not in DEMO_VARIABLES}
    full_env = {
        **inherited,
        "CONSOLE_ENV": "production",
        "DJANGO_SECRET_KEY": "k" * 20 + "3x9!Qz_vL0pR7mW2sT5yB8nC4dF6gH1jK" + "z" * 10,
        "DJANGO_ALLOWED_HOSTS": "console.example.com",
        "CONSOLE_PROXY_HOST": "console-content.example.net",
        "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:54328/console"),
        "REDIS_URL": os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({}, ["simulated cloud", "simulated payment gateway", "e-mail that is never sent"]),
        ({"CONSOLE_PROVISIONING_BACKENDS": REAL_BACKENDS, **REAL_MAIL}, ["simulated payment gateway"]),
        ({**REAL_GATEWAY, **REAL_MAIL}, ["simulated cloud"]),
        ({"CONSOLE_PROVISIONING_BACKENDS": REAL_BACKENDS, **REAL_GATEWAY}, ["e-mail that is never sent"]),
        (
            {
                "CONSOLE_PROVISIONING_BACKENDS": REAL_BACKENDS,
                **REAL_GATEWAY,
                "EMAIL_BACKEND": "console.mail.DevMailboxBackend",
            },
            ["e-mail that is never sent (console.mail.DevMailboxBackend"],
        ),
    ],
    ids=["defaults", "simulated-gateway", "simulated-cloud", "no-mail", "dev-mailbox"],
)
def test_production_refuses_to_start_with_a_demo_part(env, named):
    result = production_check(**env)
    assert result.returncode != 0, result.stdout
    assert "ImproperlyConfigured: CONSOLE_ENV=production refuses to run demo parts" in result.stderr
    for part in named:
        assert part in result.stderr
    assert "CONSOLE_DEMO_MODE=1" in result.stderr


def test_production_starts_with_real_parts():
    result = production_check(CONSOLE_PROVISIONING_BACKENDS=REAL_BACKENDS, **REAL_GATEWAY, **REAL_MAIL)
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_starts_with_demo_parts_when_it_says_it_is_a_demo():
    result = production_check(CONSOLE_DEMO_MODE="1")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_is_a_production_one_unless_told_otherwise():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    env_block = dockerfile[dockerfile.index("\nENV ") :].split("\n\n", 1)[0]
    assert "CONSOLE_ENV=production" in env_block.replace("\\\n", " ").split()
