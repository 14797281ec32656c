"""GPUs for containers through CDI (the Container Device Interface): ``--device nvidia.com/gpu=<index>``.

On a host with NVIDIA's container toolkit, ``nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml``
writes a spec that names each card (``kind: nvidia.com/gpu``, devices ``"0"``, ``"1"``…, and
``"all"``); podman reads it and gives the container the card's device nodes and driver libraries.
A host without such a spec (no GPU: the console's simulated cards) passes no device, and the
instance sees its cards' indices in ``CUDA_VISIBLE_DEVICES`` only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import yaml

KIND = "nvidia.com/gpu"


class CdiError(Exception):
    pass


def cdi_spec_devices(spec_dirs: Sequence[str | Path]) -> set[str]:
    """The names of the NVIDIA GPU devices that the CDI specs in ``spec_dirs`` define ({"0", "1", "all", …})."""
    names: set[str] = set()
    for folder in spec_dirs:
        folder = Path(folder)
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml"), *folder.glob("*.json")]):
            try:
                text = path.read_text()
                spec = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
            except (OSError, ValueError, yaml.YAMLError):
                continue
            if not isinstance(spec, dict) or spec.get("kind") != KIND:
                continue
            names.update(str(d.get("name")) for d in spec.get("devices") or () if isinstance(d, dict) and d.get("name"))
    return names


def cdi_devices(cards: Sequence[str], *, spec_dirs: Sequence[str | Path]) -> list[str]:
    """The ``--device`` values for ``cards`` (host indices), or [] when this host has no CDI spec.

    A card the spec does not name is an error: the container would start without it."""
    if not cards:
        return []
    known = cdi_spec_devices(spec_dirs)
    if not known:
        return []
    missing = [card for card in cards if str(card) not in known]
    if missing:
        raise CdiError(f"GPU {', '.join(missing)} is not in this host's CDI spec (run `nvidia-ctk cdi generate`)")
    return [f"{KIND}={card}" for card in cards]
