"""Kubernetes: GPU samples from the DCGM exporter's Prometheus text, parsed from a recording in the
exporter's format, and read per node through the fake API server's pod proxy."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from providers.base import GpuSample, InstanceSpec
from providers.kubernetes import KubernetesBackend, instance_name
from providers.kubernetes.dcgm import parse_exposition, samples_by_pod
from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server

RECORDING = (Path(__file__).parent / "recordings" / "dcgm-exporter-5xH200.txt").read_text()
KEY = "6f1c2a9b-03de-4f00-9000-000000000001"
POD = f"{instance_name(KEY)}-0"
NOW = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)


def test_the_exposition_is_read_line_by_line_and_nan_is_dropped():
    samples = parse_exposition(RECORDING)
    names = {name for name, _labels, _value in samples}
    assert "DCGM_FI_DEV_GPU_UTIL" in names
    assert len([s for s in samples if s[0] == "DCGM_FI_DEV_GPU_UTIL"]) == 5
    assert not any(s[0] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" for s in samples)  # its one value was NaN
    _name, labels, value = next(s for s in samples if s[0] == "DCGM_FI_DEV_POWER_USAGE" and s[1]["gpu"] == "1")
    assert labels["modelName"] == "NVIDIA H200" and labels["pod"] == "{pod}"
    assert value == pytest.approx(612.48)


def test_each_pod_gets_its_own_cards_in_index_order_and_other_namespaces_are_ignored():
    by_pod = samples_by_pod(RECORDING.replace("{pod}", POD), namespace="gpu-console")
    assert set(by_pod) == {POD, "inst-0b7e5d1c9a22-0"}  # trainer-0 is another namespace's; card 4 is nobody's
    assert by_pod[POD] == [
        GpuSample(
            card=0, utilization_pct=97, memory_used_mib=131072, memory_total_mib=143771, power_w=612, temperature_c=71
        ),
        GpuSample(
            card=1, utilization_pct=41, memory_used_mib=65536, memory_total_mib=143771, power_w=403, temperature_c=58
        ),
    ]


def test_a_card_without_memory_figures_has_no_total():
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",namespace="ns",pod="p"} 12\n'
    assert samples_by_pod(text, namespace="ns") == {
        "p": [GpuSample(card=0, utilization_pct=12, memory_used_mib=None, memory_total_mib=None)]
    }


@pytest.fixture
def api(tmp_path):
    with fake_api_server(tmp_path) as server:
        server.cluster.add_node("gpu-a", product="NVIDIA-H200", gpus=8)
        yield server


def _running(api) -> tuple[KubernetesBackend, dict]:
    backend = KubernetesBackend(
        alias="k8s", options={"KUBECONFIG": str(api.kubeconfig), "REGION": "k8s-1", "IMAGES": IMAGES}
    )
    spec = InstanceSpec(
        node="gpu-a", gpu_model="h200", gpu_count=2, image="pytorch-2.5-cu124", disk_gb=20, owner_ref="user-1"
    )
    state = backend.create(key=KEY, spec=spec)
    api.cluster.advance()
    return backend, state


def test_the_backend_reads_the_exporter_of_the_node_its_pod_runs_on(api):
    backend, state = _running(api)
    # The instance's pod runs in its tenant's namespace, as the exporter labels it.
    recording = RECORDING.replace("{pod}", POD).replace('namespace="gpu-console"', 'namespace="gpuc-user-1"')
    api.cluster.add_dcgm_exporter("gpu-a", recording)
    samples = backend.gpu_samples(machines=[(KEY, state), ("never-made", {})], at=NOW)
    assert list(samples) == [KEY]
    assert [(s.card, s.utilization_pct, s.memory_total_mib) for s in samples[KEY]] == [(0, 97, 143771), (1, 41, 143771)]
    assert ("get", "", "pods/proxy") in api.cluster.requests


def test_a_node_without_an_exporter_leaves_its_machines_out(api):
    backend, state = _running(api)
    assert backend.gpu_samples(machines=[(KEY, state)], at=NOW) == {}


def test_gpu_samples_can_be_turned_off(api):
    _backend, state = _running(api)
    api.cluster.add_dcgm_exporter("gpu-a", RECORDING.replace("{pod}", POD))
    off = KubernetesBackend(alias="k8s", options={"KUBECONFIG": str(api.kubeconfig), "DCGM_NAMESPACE": ""})
    assert off.gpu_samples(machines=[(KEY, state)], at=NOW) == {}
