import os
import subprocess
import sys

from django.conf import settings


def test_unknown_api_paths_answer_json_404(client, db):
    response = client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_anonymous_visitors_see_prices_and_sign_up(client, db):
    from instances.catalogue import catalogue_seed

    catalogue_seed()
    response = client.get("/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "A800 80GB" in body and "¥1.90" in body
    assert "/accounts/signup/" in body


def test_pages_need_login(client, db):
    response = client.get("/dashboard/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_production_settings_pass_the_deploy_check():
    env = {
        **os.environ,
        "CONSOLE_ENV": "production",
        "DJANGO_SECRET_KEY": "k" * 20 + "3x9!Qz_vL0pR7mW2sT5yB8nC4dF6gH1jK" + "z" * 10,
        "DJANGO_ALLOWED_HOSTS": "console.example.com",
        "CONSOLE_PROXY_HOST": "apps.console.example.com",
        # Named, not reached: the check connects to neither.
        "DATABASE_URL": "postgres://console@127.0.0.1:5432/console",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        # The simulated cloud and gateway are the defaults: a demo (console/tests/test_demo_parts_check.py).
        "CONSOLE_DEMO_MODE": "1",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"CONSOLE_ENV": "production", "DJANGO_ALLOWED_HOSTS": "console.example.com"})
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr
