"""Production refuses the demo parts: ``check --deploy`` fails while the simulated cloud or the simulated
payment gateway is enabled, unless CONSOLE_DEMO_MODE says the console is a demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.checks import ERROR, Error, Tags, run_checks
from django.test import override_settings

from billing.gateways import PaymentGateway
from providers.simulated.backend import SimulatedBackend

REAL_GATEWAY = "console.tests.test_demo_parts_check.RealGateway"
REAL_BACKENDS = {"hpc": {"BACKEND": "providers.slurm.backend.SlurmBackend", "OPTIONS": {"REGION": "hpc"}}}
SIMULATED_CLOUD = {"default": {"BACKEND": "providers.simulated.backend.SimulatedBackend", "OPTIONS": {}}}


class RealGateway(PaymentGateway):
    """Stands for a gateway that takes real money, with no keys to configure."""

    name = "real"


class FlakyFakeBackend(SimulatedBackend):
    """A test fake built on the simulated cloud is simulated too."""


def demo_errors() -> dict[str, Error]:
    messages = run_checks(tags=[Tags.security], include_deployment_checks=True)
    return {m.id: m for m in messages if m.id in ("console.E001", "console.E002")}


# --- The check, in process -------------------------------------------------------------------------------


@override_settings(CONSOLE_DEMO_MODE=False, PROVISIONING_BACKENDS=SIMULATED_CLOUD, BILLING_PAYMENT_GATEWAY=REAL_GATEWAY)
def test_the_simulated_cloud_is_an_error_with_a_hint():
    errors = demo_errors()
    assert set(errors) == {"console.E001"}
    assert errors["console.E001"].level == ERROR  # fails check --deploy at its default level
    assert errors["console.E001"].obj == "PROVISIONING_BACKENDS['default']"
    assert '{"default": null}' in errors["console.E001"].hint and "CONSOLE_DEMO_MODE=1" in errors["console.E001"].hint


@override_settings(
    CONSOLE_DEMO_MODE=False,
    PROVISIONING_BACKENDS={**REAL_BACKENDS, "chaos": {"BACKEND": f"{__name__}.FlakyFakeBackend"}},
    BILLING_PAYMENT_GATEWAY=REAL_GATEWAY,
)
def test_a_subclass_of_the_simulated_cloud_counts_under_its_own_alias():
    errors = demo_errors()
    assert set(errors) == {"console.E001"}
    assert errors["console.E001"].obj == "PROVISIONING_BACKENDS['chaos']"


@override_settings(
    CONSOLE_DEMO_MODE=False,
    PROVISIONING_BACKENDS=REAL_BACKENDS,
    BILLING_PAYMENT_GATEWAY="billing.gateways.simulated.SimulatedGateway",
)
def test_the_simulated_gateway_is_an_error_with_a_hint():
    errors = demo_errors()
    assert set(errors) == {"console.E002"}
    assert errors["console.E002"].obj == "BILLING_PAYMENT_GATEWAY"
    assert "SimulatedGateway" in errors["console.E002"].msg
    assert "CONSOLE_DEMO_MODE=1" in errors["console.E002"].hint


@override_settings(CONSOLE_DEMO_MODE=True)
def test_demo_mode_allows_both():
    assert demo_errors() == {}


@override_settings(CONSOLE_DEMO_MODE=False, PROVISIONING_BACKENDS=REAL_BACKENDS, BILLING_PAYMENT_GATEWAY=REAL_GATEWAY)
def test_a_console_without_demo_parts_passes():
    assert demo_errors() == {}


def test_the_check_is_a_deployment_check_only():
    with override_settings(CONSOLE_DEMO_MODE=False):
        assert not [m for m in run_checks(tags=[Tags.security]) if m.id.startswith("console.E00")]


# --- manage.py check --deploy with CONSOLE_ENV=production ----------------------------------------------------


def production_check(**env: str) -> subprocess.CompletedProcess:
    """``manage.py check --deploy`` in a production process (it reads settings, connects to nothing)."""
    inherited = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "CONSOLE_DEMO_MODE",
            "CONSOLE_PROVISIONING_BACKENDS",
            "BILLING_PAYMENT_GATEWAY",
            "CONSOLE_LOCAL_BACKEND",
            "CONSOLE_SLURM_BACKEND",
            "KUBERNETES_BACKEND_OPTIONS",
            "EMAIL_BACKEND",
        }
    }
    full_env = {
        **inherited,
        "CONSOLE_ENV": "production",
        "DJANGO_SECRET_KEY": "k" * 20 + "3x9!Qz_vL0pR7mW2sT5yB8nC4dF6gH1jK" + "z" * 10,
        "DJANGO_ALLOWED_HOSTS": "console.example.com",
        "CONSOLE_PROXY_HOST": "apps.console.example.com",
        "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console"),
        "REDIS_URL": os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
        "EMAIL_HOST": "smtp.example.com",  # named, not reached: e-mail is not the demo part here
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
    )


WITHOUT_CLOUD = json.dumps({"default": None, **REAL_BACKENDS})
WITH_REAL_GATEWAY = {"BILLING_PAYMENT_GATEWAY": REAL_GATEWAY, "BILLING_GATEWAY_WEBHOOK_SECRET": "whsec-test"}


@pytest.mark.parametrize(
    ("env", "expected", "not_expected"),
    [
        ({**WITH_REAL_GATEWAY}, "the simulated cloud", "the simulated payment gateway"),
        ({"CONSOLE_PROVISIONING_BACKENDS": WITHOUT_CLOUD}, "the simulated payment gateway", "the simulated cloud"),
    ],
    ids=["simulated-cloud", "simulated-gateway"],
)
def test_production_refuses_a_demo_part_before_the_deploy_check(env, expected, not_expected):
    """Production does not start on a demo part at all (console.demo.production_demo_parts_refuse), so
    the check's errors (console.E001, E002) remain for consoles checked outside production."""
    result = production_check(**env)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert expected in output and not_expected not in output
    assert "CONSOLE_DEMO_MODE=1" in output


def test_production_passes_with_demo_mode():
    result = production_check(CONSOLE_DEMO_MODE="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_passes_without_demo_parts():
    result = production_check(CONSOLE_PROVISIONING_BACKENDS=WITHOUT_CLOUD, **WITH_REAL_GATEWAY)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@override_settings(
    CONSOLE_DEMO_MODE=False,
    PROVISIONING_BACKENDS=REAL_BACKENDS,
    BILLING_PAYMENT_GATEWAY="billing.gateways.stripe_checkout.StripeGateway",
    BILLING_EXTRA_PAYMENT_GATEWAYS=["billing.gateways.simulated.SimulatedGateway"],
)
def test_the_simulated_gateway_offered_beside_a_real_one_still_fails_the_deploy_check():
    assert set(demo_errors()) == {"console.E002"}
