"""The simulated cloud's GPU figures: plausible, and the same every time for a machine and a moment.

A machine's day is cut into 20-minute stretches; about one in four is idle (0-2 % utilisation, the
memory a forgotten notebook keeps, the power an idle card draws), the others are training at a level
of the machine's own with some noise. Everything derives from a hash of (key, card, time), never from
a random generator, so the web, the worker and a test all compute the same sample for the same tick
and a repeated collection stores the same figures.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from providers.base import GpuProcess, GpuSample

STRETCH_S = 20 * 60  # a stretch of steady work (or of idleness)
IDLE_SHARE = 4  # one stretch in this many is idle
# Card memory (MiB) of the GPU models the simulated fleet offers; others get 80 GiB.
MEMORY_MIB = {
    "h200": 143771,
    "h100": 81559,
    "h800": 81559,
    "a800-80g": 81920,
    "a100-80g": 81920,
    "a100-40g": 40960,
    "l40s": 46068,
    "rtx-4090": 24564,
    "rtx-3090": 24576,
}
# Board power limit (W), the top of the power series.
POWER_W = {"h200": 700, "h100": 700, "h800": 700, "l40s": 350, "rtx-4090": 450, "rtx-3090": 350}


def _unit(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts``."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def stretch_is_idle(key: str, at: datetime) -> bool:
    """Whether machine ``key`` sits idle in the stretch that holds ``at`` (all its cards at once)."""
    return _unit(key, "stretch", int(at.timestamp()) // STRETCH_S) < 1 / IDLE_SHARE


def simulated_sample(*, key: str, card: int, at: datetime, gpu_model: str) -> GpuSample:
    """Card ``card`` of machine ``key`` at ``at``."""
    total = MEMORY_MIB.get(gpu_model, 81920)
    limit = POWER_W.get(gpu_model, 400)
    tick = int(at.timestamp()) // 15
    noise = _unit(key, card, tick)
    idle = stretch_is_idle(key, at)
    if idle:
        util = int(noise * 3)  # 0-2 %
        memory = int(total * (0.02 + 0.03 * _unit(key, card, "idle-mem")))
        load = 0.0
    else:
        level = 55 + 40 * _unit(key, card, "level")  # this card's usual load: 55-95 %
        util = max(0, min(100, round(level + (noise - 0.5) * 20)))
        memory = int(total * (0.45 + 0.45 * _unit(key, card, "mem")))
        load = util / 100
    power = round(limit * (0.1 + 0.85 * load))
    temperature = round(32 + 50 * load + noise * 3)
    return GpuSample(
        card=card,
        utilization_pct=util,
        memory_used_mib=memory,
        memory_total_mib=total,
        power_w=power,
        temperature_c=temperature,
        # A training run holds the busy cards (one process for all of them); a forgotten notebook's
        # kernel keeps its memory on an idle one.
        processes=(
            GpuProcess(
                pid=1000 + int(_unit(key, "pid", idle) * 60000),
                name="/opt/conda/bin/python3 -m ipykernel_launcher" if idle else "/opt/conda/bin/python3 train.py",
                memory_used_mib=max(0, memory - 600),
            ),
        ),
    )
