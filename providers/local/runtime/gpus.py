"""GPU discovery: what cards this host has, from ``nvidia-smi`` (or simulated when it has none).

We parse ``nvidia-smi --query-gpu=… --format=csv,noheader,nounits`` because it is stable across
driver releases and needs no library; NVML through pynvml would give the same fields. A host without
the driver ("command not found") or without cards ("No devices were found", exit status 6) offers
``simulated`` cards instead, so the console's flow still runs on a laptop or in CI.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from providers.local.runtime.ports import LockedJsonFile

QUERY_FIELDS = ("index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used")
NVIDIA_SMI_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
# What the console's charts sample every 15 s (``gpu_sample``): the same CSV form, more fields; the
# UUID ties each card to the processes the second query lists.
SAMPLE_FIELDS = ("index", "utilization.gpu", "memory.used", "memory.total", "power.draw", "temperature.gpu", "uuid")
NVIDIA_SMI_SAMPLE_ARGS = ("--query-gpu=" + ",".join(SAMPLE_FIELDS), "--format=csv,noheader,nounits")
# The processes using each card (compute work: CUDA contexts), named by the card's UUID.
APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
NVIDIA_SMI_APPS_ARGS = ("--query-compute-apps=" + ",".join(APPS_FIELDS), "--format=csv,noheader,nounits")

# The console's GPU model slugs (instances.catalogue) for the names nvidia-smi prints.
_MODEL_SLUGS = [
    (re.compile(r"\bH200\b"), "h200"),
    (re.compile(r"\bH800\b"), "h800"),
    (re.compile(r"\bH100\b"), "h100"),
    (re.compile(r"\bA800\b.*80"), "a800-80g"),
    (re.compile(r"\bA100\b.*40"), "a100-40g"),
    (re.compile(r"\bA100\b.*80"), "a100-80g"),
    (re.compile(r"\bL40S\b"), "l40s"),
    (re.compile(r"RTX 4090"), "rtx-4090"),
    (re.compile(r"RTX 3090"), "rtx-3090"),
]


class GpuDiscoveryError(Exception):
    """nvidia-smi ran but its answer could not be understood (a driver problem, not "no GPU")."""


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    memory_total_mib: int
    utilization_pct: int | None  # None where the driver says [N/A]
    memory_used_mib: int | None
    simulated: bool = False

    @property
    def model_slug(self) -> str:
        return gpu_model_slug(self.name)


@dataclass(frozen=True)
class GpuInventory:
    gpus: tuple[Gpu, ...]
    simulated: bool
    detail: str = ""  # why the cards are simulated, or "" when they are real
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def model_slug(self) -> str:
        """The host's GPU model: the most common one (hosts are homogeneous in practice)."""
        slugs = [g.model_slug for g in self.gpus]
        return max(set(slugs), key=slugs.count) if slugs else ""


def gpu_model_slug(name: str) -> str:
    for pattern, slug in _MODEL_SLUGS:
        if pattern.search(name):
            return slug
    return re.sub(r"[^a-z0-9]+", "-", name.lower().removeprefix("nvidia ")).strip("-")


def _int_or_none(value: str) -> int | None:
    value = value.strip()
    if not value or value.startswith("[") or value.upper() == "N/A":  # [N/A], [Not Supported]
        return None
    return int(float(value))


def parse_nvidia_smi_csv(text: str) -> list[Gpu]:
    """Parse the CSV that ``nvidia-smi NVIDIA_SMI_ARGS`` prints, one card a line."""
    gpus = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            raise GpuDiscoveryError(f"nvidia-smi line {lineno}: expected {len(QUERY_FIELDS)} fields: {line!r}")
        try:
            index = int(cells[0])
            memory_total = _int_or_none(cells[3])
        except ValueError as exc:
            raise GpuDiscoveryError(f"nvidia-smi line {lineno}: {exc}") from exc
        if memory_total is None:
            raise GpuDiscoveryError(f"nvidia-smi line {lineno}: no memory size")
        gpus.append(
            Gpu(
                index=index,
                uuid=cells[1],
                name=cells[2],
                memory_total_mib=memory_total,
                utilization_pct=_int_or_none(cells[4]),
                memory_used_mib=_int_or_none(cells[5]),
            )
        )
    return sorted(gpus, key=lambda g: g.index)


@dataclass(frozen=True)
class GpuApp:
    """A process using a card (``nvidia-smi NVIDIA_SMI_APPS_ARGS``). Inside a container the driver may
    not know its name ("[Not Found]"): the name is then empty."""

    pid: int
    name: str
    memory_used_mib: int | None


@dataclass(frozen=True)
class GpuReading:
    """One host card's figures at one moment (``nvidia-smi NVIDIA_SMI_SAMPLE_ARGS``); None where the
    driver says [N/A] or [Not Supported] (power on some consumer boards, everything on a MIG slice)."""

    index: int
    utilization_pct: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    power_w: int | None
    temperature_c: int | None
    uuid: str = ""
    processes: tuple[GpuApp, ...] = ()


def parse_nvidia_smi_samples(text: str) -> dict[int, GpuReading]:
    """Parse the CSV that ``nvidia-smi NVIDIA_SMI_SAMPLE_ARGS`` prints, by card index."""
    readings = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(SAMPLE_FIELDS):
            raise GpuDiscoveryError(f"nvidia-smi line {lineno}: expected {len(SAMPLE_FIELDS)} fields: {line!r}")
        try:
            index = int(cells[0])
            figures = [_int_or_none(cell) for cell in cells[1:6]]
        except ValueError as exc:
            raise GpuDiscoveryError(f"nvidia-smi line {lineno}: {exc}") from exc
        readings[index] = GpuReading(index, *figures, uuid=cells[6])
    return readings


def parse_nvidia_smi_apps(text: str) -> dict[str, tuple[GpuApp, ...]]:
    """Parse the CSV that ``nvidia-smi NVIDIA_SMI_APPS_ARGS`` prints, by card UUID (pid order). A line
    that cannot be read is skipped: processes are shown, never judged on."""
    apps: dict[str, list[GpuApp]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(APPS_FIELDS) or not cells[1].isdigit():
            continue
        name = "" if cells[2].startswith("[") else cells[2]
        apps.setdefault(cells[0], []).append(GpuApp(int(cells[1]), name[:200], _int_or_none(cells[3])))
    return {uuid: tuple(sorted(found, key=lambda a: a.pid)) for uuid, found in apps.items()}


def gpu_read(*, nvidia_smi: str = "nvidia-smi", runner: Runner | None = None) -> dict[int, GpuReading]:
    """Every host card's figures now; {} on a host without the driver or cards (its cards are simulated
    and have nothing to report). A driver that answers with nonsense or hangs is a ``GpuDiscoveryError``."""
    try:
        result = (runner or _run)([nvidia_smi, *NVIDIA_SMI_SAMPLE_ARGS])
    except FileNotFoundError:
        return {}
    except subprocess.TimeoutExpired:
        raise GpuDiscoveryError(f"{nvidia_smi} did not answer within 20 s") from None
    output = (result.stdout or "") + (result.stderr or "")
    if "No devices were found" in output:
        return {}
    if result.returncode != 0:
        raise GpuDiscoveryError(f"nvidia-smi exited with status {result.returncode}: {output.strip()[:300]}")
    readings = parse_nvidia_smi_samples(result.stdout)
    if not readings:
        return readings
    apps = _apps(nvidia_smi=nvidia_smi, runner=runner or _run)
    return {i: replace(r, processes=apps.get(r.uuid, ())) for i, r in readings.items()}


def _apps(*, nvidia_smi: str, runner: Runner) -> dict[str, tuple[GpuApp, ...]]:
    """The processes on the host's cards; none when the driver will not list them (the figures stand)."""
    try:
        result = runner([nvidia_smi, *NVIDIA_SMI_APPS_ARGS])
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_nvidia_smi_apps(result.stdout or "") if result.returncode == 0 else {}


def simulated_gpus(count: int, *, name: str = "NVIDIA H200", memory_total_mib: int = 143771) -> list[Gpu]:
    return [
        Gpu(
            index=i,
            uuid=f"GPU-SIMULATED-{i:04d}",
            name=name,
            memory_total_mib=memory_total_mib,
            utilization_pct=0,
            memory_used_mib=0,
            simulated=True,
        )
        for i in range(count)
    ]


Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)  # noqa: S603


def gpu_discover(
    *,
    nvidia_smi: str = "nvidia-smi",
    simulated: int = 0,
    simulated_name: str = "NVIDIA H200",
    runner: Runner = _run,
) -> GpuInventory:
    """The host's cards; ``simulated`` cards when it has none (0 means: offer none)."""

    def fallback(detail: str) -> GpuInventory:
        return GpuInventory(gpus=tuple(simulated_gpus(simulated, name=simulated_name)), simulated=True, detail=detail)

    try:
        result = runner([nvidia_smi, *NVIDIA_SMI_ARGS])
    except FileNotFoundError:
        return fallback(f"{nvidia_smi} not found: no NVIDIA driver on this host")
    except subprocess.TimeoutExpired:
        # A hung driver is a sick host, not an empty one: report it rather than invent cards.
        raise GpuDiscoveryError(f"{nvidia_smi} did not answer within 20 s") from None
    output = (result.stdout or "") + (result.stderr or "")
    if "No devices were found" in output or (result.returncode == 0 and not result.stdout.strip()):
        return fallback("nvidia-smi found no devices")
    if result.returncode != 0:
        raise GpuDiscoveryError(f"nvidia-smi exited with status {result.returncode}: {output.strip()[:300]}")
    return GpuInventory(gpus=tuple(parse_nvidia_smi_csv(result.stdout)), simulated=False)


class NotEnoughGpus(Exception):
    pass


class GpuRegistry(LockedJsonFile):
    """Which of the host's cards each instance holds: ``{key: ["0", "1"]}``, so no card is given twice.

    Cards are named by index, as ``CUDA_VISIBLE_DEVICES`` takes them. An instance keeps its cards
    while it exists in the registry; ``release`` (on stop and destroy) gives them back.
    """

    def allocate(self, key: str, count: int, available: Sequence[str]) -> list[str]:
        """``count`` cards for ``key``: the ones it holds, or free ones from ``available`` (lowest first)."""
        with self._locked() as data:
            held = data.get(key, [])
            if len(held) == count and set(held) <= set(available):
                return list(held)
            taken = {card for other, cards in data.items() if other != key for card in cards}
            free = [card for card in available if card not in taken]
            if len(free) < count:
                raise NotEnoughGpus(f"{count} GPUs asked for, {len(free)} free on this host")
            data[key] = sorted(free, key=_card_order)[:count]
            return list(data[key])

    def get(self, key: str) -> list[str]:
        with self._locked() as data:
            return list(data.get(key, []))

    def release(self, key: str) -> None:
        with self._locked() as data:
            data.pop(key, None)

    def all(self) -> dict[str, list[str]]:
        with self._locked() as data:
            return {key: list(cards) for key, cards in data.items()}


def _card_order(card: str) -> tuple[int, str]:
    return (int(card), "") if card.isdigit() else (1 << 30, card)
