"""GPU figures from NVIDIA's DCGM exporter: its Prometheus text, read per node, shared out by pod.

The GPU Operator runs ``dcgm-exporter`` as a DaemonSet; each of its pods serves, on port 9400, one
line per card and field, labelled with the pod that holds the card (the kubelet's pod-resources API
tells it)::

    DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-…",modelName="NVIDIA H200",namespace="gpu-console",pod="inst-6f1c2a9b03de-0",container="workspace"} 87

The backend reads the exporter on each node that runs one of its machines, through the API server's
pod proxy (``pods/proxy``: no route from the console to the pod network is needed), and
``samples_by_pod`` turns the text into the console's ``GpuSample`` per card of each pod. A card's
position in the machine is its order by the node's card index: a pod holding cards 3 and 5 reports
them as cards 0 and 1.
"""

from __future__ import annotations

import re

from providers.base import GpuSample

# DCGM field -> GpuSample attribute. Frame-buffer memory is MiB; power is watts (a float).
FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "utilization_pct",
    "DCGM_FI_DEV_FB_USED": "memory_used_mib",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
}
# Total memory is not a field of its own: used + free (+ reserved, on drivers that report it).
TOTAL_PARTS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")

_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\d+)?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a Prometheus text exposition: ``(name, labels, value)``; comments and lines
    that do not parse (a newer exporter's extras) are skipped, NaN values too."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        if value != value:  # NaN: the exporter could not read the field
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(match["labels"] or "")}
        samples.append((match["name"], labels, value))
    return samples


def samples_by_pod(text: str, *, namespace: str) -> dict[str, list[GpuSample]]:
    """Per pod of ``namespace``, its cards' samples (cards of other namespaces, or of none, are left out)."""
    cards: dict[tuple[str, int], dict[str, float]] = {}
    for name, labels, value in parse_exposition(text):
        if name not in FIELDS and name not in TOTAL_PARTS:
            continue
        pod = labels.get("pod") or labels.get("exported_pod")
        pod_namespace = labels.get("namespace") or labels.get("exported_namespace")
        if not pod or pod_namespace != namespace or not labels.get("gpu", "").isdigit():
            continue
        cards.setdefault((pod, int(labels["gpu"])), {})[name] = value
    by_pod: dict[str, list[GpuSample]] = {}
    for pod, gpu in sorted(cards):
        figures = cards[(pod, gpu)]
        parts = [figures[p] for p in TOTAL_PARTS if p in figures]
        total = int(sum(parts)) if "DCGM_FI_DEV_FB_USED" in figures and len(parts) > 1 else None
        values = {attr: (round(figures[field]) if field in figures else None) for field, attr in FIELDS.items()}
        position = len(by_pod.setdefault(pod, []))
        by_pod[pod].append(GpuSample(card=position, memory_total_mib=total, **values))
    return by_pod
