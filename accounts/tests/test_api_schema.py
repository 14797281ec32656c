import subprocess
import sys

from django.conf import settings


def test_the_openapi_schema_validates_without_warnings():
    result = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stderr


def test_the_schema_documents_the_account_endpoints_and_bearer_auth(client, db):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    assert {"/api/v1/account/profile/", "/api/v1/account/ssh-keys/", "/api/v1/account/tokens/{id}/"} <= set(
        schema["paths"]
    )
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
