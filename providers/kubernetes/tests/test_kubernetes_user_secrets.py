"""The owner's secrets on Kubernetes: a Secret of their own in the tenant's namespace, mounted read-only at
/run/console-secrets and, when asked, a variable by secretKeyRef; the pod's spec and the backend's state
name keys, never a value; a new choice replaces the Secret, a stop removes it; the manifests stay valid."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest

from providers.base import SecretValue
from providers.kubernetes import pod_template, statefulset_manifest, user_secret_manifest
from providers.kubernetes.tests.k8s_fake import validate_manifest
from providers.kubernetes.tests.test_kubernetes_backend import KEY, NAME, spec
from providers.kubernetes.tests.test_kubernetes_manifests import OPTS, SPEC

CHOSEN = (
    SecretValue(name="WANDB_API_KEY", value="wandb-topsecret", env=True),
    SecretValue(name="HF_TOKEN", value="hf-topsecret", env=False),
)


def test_the_manifests_are_valid_and_name_no_value():
    with_secrets = replace(SPEC, secrets=CHOSEN)
    sts = statefulset_manifest(OPTS, alias="k8s", key=KEY, spec=with_secrets)
    secret = user_secret_manifest(OPTS, alias="k8s", key=KEY, spec=with_secrets)
    for manifest in (sts, secret):
        validate_manifest(manifest)
    assert "topsecret" not in json.dumps(sts)
    assert secret["stringData"] == {"WANDB_API_KEY": "wandb-topsecret", "HF_TOKEN": "hf-topsecret"}
    pod = pod_template(OPTS, alias="k8s", key=KEY, spec=with_secrets)["spec"]
    workspace = pod["containers"][0]
    assert {"name": "user-secrets", "mountPath": "/run/console-secrets", "readOnly": True} in workspace["volumeMounts"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in workspace["env"] if "valueFrom" in e}
    assert refs == {"WANDB_API_KEY": "WANDB_API_KEY"}  # HF_TOKEN is a file only
    # Without secrets, the pod is as before: no mount, no volume.
    plain = pod_template(OPTS, alias="k8s", key=KEY, spec=SPEC)["spec"]
    assert all(v["name"] != "user-secrets" for v in plain["volumes"])


@pytest.fixture
def api(tmp_path):
    from providers.kubernetes.tests.k8s_fake import fake_api_server

    with fake_api_server(tmp_path) as server:
        server.cluster.add_node("gpu-a", product="NVIDIA-H200", gpus=8)
        yield server


def _values(api) -> dict | None:
    found = api.cluster.get("secrets", f"{NAME}-user-secrets")
    if found is None:
        return None
    return {k: base64.b64decode(v).decode() for k, v in (found.get("data") or {}).items()}


def test_the_secret_lives_while_the_machine_runs(api):
    from providers.kubernetes.tests.test_kubernetes_backend import backend_for

    backend = backend_for(api)
    state = backend.create(key=KEY, spec=spec(secrets=CHOSEN))
    assert _values(api) == {"WANDB_API_KEY": "wandb-topsecret", "HF_TOKEN": "hf-topsecret"}
    assert "topsecret" not in json.dumps(state)
    assert "topsecret" not in json.dumps(api.cluster.get("statefulsets", NAME))
    state = backend.stop(key=KEY, state=state)
    assert _values(api) is None  # a stopped machine's secrets are not kept in the cluster
    state = backend.start(key=KEY, state=state, node="gpu-a", spec=spec(secrets=CHOSEN[1:]))
    assert _values(api) == {"HF_TOKEN": "hf-topsecret"}
    assert "topsecret" not in json.dumps(state)
    backend.destroy(key=KEY, state=state)
    assert _values(api) is None


def test_a_cluster_with_secrets_is_refused_rather_than_booted_without_them(api):
    from providers.base import PermanentBackendError
    from providers.kubernetes.tests.test_kubernetes_backend import backend_for

    with pytest.raises(PermanentBackendError, match="secrets"):
        backend_for(api).create(key=KEY, spec=spec(nodes=2, secrets=CHOSEN))
