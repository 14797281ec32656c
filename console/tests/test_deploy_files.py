"""The console's deployment files: the Kubernetes manifests validate against the API's schemas (offline,
with kubernetes-validate), the compose file has the services a deployment needs and configures only
settings the console reads, and ``docker compose config`` accepts it where the client is installed."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
K8S_VERSION = "1.33.0"
# Read by the processes but not settings: Django's own and Python's.
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"}


def settings_env_names() -> set[str]:
    """Every environment variable console/settings/ (the package's modules) reads."""
    source = "\n".join(path.read_text() for path in sorted((ROOT / "console/settings").glob("*.py")))
    pattern = r'(?:os\.environ(?:\.get)?[\[(]|env_bool\(|env_list\()\s*"([A-Z][A-Z0-9_]*)"'
    names = set(re.findall(pattern, source))
    if "dj_database_url.config(" in source:  # it reads DATABASE_URL
        names.add("DATABASE_URL")
    return names


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def console_yaml() -> list[dict]:
    return documents(DEPLOY / "kubernetes/console.yaml")


def find(docs: list[dict], kind: str, name: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


# --- Kubernetes -------------------------------------------------------------------------------------------


def test_settings_env_names_are_found():
    names = settings_env_names()
    assert {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "CONSOLE_ENV"} <= names
    assert "CONSOLE_PROVISIONING_BACKENDS" in names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_validates_strictly(path):
    docs = documents(path)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_broken_manifest_fails_validation():
    web = find(console_yaml(), "Deployment", "console-web")
    wrong_type = copy.deepcopy(web)
    wrong_type["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, K8S_VERSION, strict=True)
    unknown_field = copy.deepcopy(web)
    unknown_field["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {"path": "/"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown_field, K8S_VERSION, strict=True)
    no_containers = copy.deepcopy(web)
    del no_containers["spec"]["template"]["spec"]["containers"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(no_containers, K8S_VERSION, strict=True)


def test_the_console_runs_two_web_pods_three_workers_one_beat_and_a_migration_job():
    docs = console_yaml()
    web = find(docs, "Deployment", "console-web")
    worker = find(docs, "Deployment", "console-worker")
    beat = find(docs, "Deployment", "console-beat")
    job = find(docs, "Job", "console-migrate")
    assert (web["spec"]["replicas"], worker["spec"]["replicas"], beat["spec"]["replicas"]) == (2, 3, 1)
    assert beat["spec"]["strategy"]["type"] == "Recreate"  # never two beats, even during a rollout
    container = web["spec"]["template"]["spec"]["containers"][0]
    # Readiness asks the database, cache and broker; liveness only that the process answers.
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["args"][:2] == ["uvicorn", "console.asgi:application"]
    assert worker["spec"]["template"]["spec"]["containers"][0]["args"][:4] == ["celery", "-A", "console", "worker"]
    assert beat["spec"]["template"]["spec"]["containers"][0]["args"][:4] == ["celery", "-A", "console", "beat"]
    assert "manage.py migrate" in " ".join(job["spec"]["template"]["spec"]["containers"][0]["args"])


def test_the_ssh_gateway_runs_as_its_own_deployment_behind_a_load_balancer():
    docs = console_yaml()
    gateway = find(docs, "Deployment", "console-gateway")
    service = find(docs, "Service", "console-gateway")
    container = gateway["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:3] == ["python", "-m", "gateway"]
    assert container["readinessProbe"]["tcpSocket"]["port"] == "ssh"
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["selector"].items() <= gateway["spec"]["template"]["metadata"]["labels"].items()
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(2222, "ssh")]


def test_selectors_services_and_probes_fit_together():
    docs = console_yaml()
    config = find(docs, "ConfigMap", "console-config")
    allowed = config["data"]["DJANGO_ALLOWED_HOSTS"].split(",")
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            spec = doc["spec"]
            labels = spec["template"]["metadata"]["labels"]
            if doc["kind"] == "Deployment":
                assert spec["selector"]["matchLabels"].items() <= labels.items()
            for container in spec["template"]["spec"]["containers"]:
                refs = {k: v["name"] for ref in container["envFrom"] for k, v in ref.items()}
                assert refs == {"configMapRef": "console-config", "secretRef": "console-secrets"}
                for probe in ("readinessProbe", "livenessProbe"):
                    if "httpGet" in container.get(probe, {}):
                        headers = {h["name"]: h["value"] for h in container[probe]["httpGet"]["httpHeaders"]}
                        assert headers["Host"] in allowed  # or Django answers 400
    web_labels = find(docs, "Deployment", "console-web")["spec"]["template"]["metadata"]["labels"]
    assert find(docs, "Service", "console-web")["spec"]["selector"].items() <= web_labels.items()


def test_the_configmap_sets_only_settings_the_console_reads():
    data = find(console_yaml(), "ConfigMap", "console-config")["data"]
    assert set(data) <= settings_env_names()
    assert data["CONSOLE_ENV"] == "production"
    # The secret's keys are documented in the file's header; they must be settings too.
    header = (DEPLOY / "kubernetes/console.yaml").read_text().split("apiVersion", 1)[0]
    secret_keys = set(re.findall(r"--from-literal=([A-Z_]+)=", header))
    assert secret_keys == {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL"}
    assert secret_keys <= settings_env_names()


# --- Compose ----------------------------------------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


CONSOLE_SERVICES = ("migrate", "web", "worker", "beat", "gateway")


def test_compose_has_the_services_of_a_deployment():
    services = compose()["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "beat"} <= set(services)
    assert services["web"]["deploy"]["replicas"] == 2
    assert services["worker"]["deploy"]["replicas"] == 3
    assert "replicas" not in services["beat"].get("deploy", {})
    assert services["migrate"]["restart"] == "no"
    assert "manage.py migrate" in " ".join(services["migrate"]["command"])
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # nginx starts once a web process is ready: its database, cache and broker answer.
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    # The SSH gateway: its own process, published on the host.
    assert services["gateway"]["command"][:3] == ["python", "-m", "gateway"]
    assert services["gateway"]["ports"] == ["${GATEWAY_PORT:-2222}:2222"]
    assert services["gateway"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_compose_sets_only_settings_the_console_reads():
    services = compose()["services"]
    names = settings_env_names() | NOT_SETTINGS
    for name in CONSOLE_SERVICES:
        env = services[name]["environment"]
        assert set(env) <= names, f"{name}: {set(env) - names} are not read by console/settings/"
        assert env["CONSOLE_ENV"] == "production"
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://redis:6379/")
        assert "DJANGO_SECRET_KEY" in env and "DJANGO_ALLOWED_HOSTS" in env


def test_the_dockerfile_installs_the_requirements_and_collects_static_files():
    text = (DEPLOY / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM ${BASE}" in text
    assert "pip install --require-hashes -r requirements.txt" in text
    assert "manage.py collectstatic --noinput" in text
    assert "USER console" in text
    for path in re.findall(r"^COPY (\S+)", text, flags=re.M):
        assert path == "." or (ROOT / path).exists()


def _docker_compose() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    # Not Debian's docker-compose 1.29: it predates the Compose Specification the file is written in.
    return None


def test_docker_compose_accepts_the_file():
    command = _docker_compose()
    if command is None:
        pytest.skip("the docker compose client is not installed here (docker compose version failed)")
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": "x" * 50,
        "POSTGRES_PASSWORD": "test",
        "CONSOLE_PROXY_HOST": "apps.localhost",
    }
    result = subprocess.run(
        [*command, "-f", str(DEPLOY / "compose.yaml"), "config", "-q"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
