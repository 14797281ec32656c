"""Reading Slurm's answers: one shape for a job and a node, whichever Slurm wrote them.

Slurm describes a job or a node in two generations of JSON, and both reach the backend:

- OpenAPI ``v0.0.38`` (slurmrestd of Slurm 22.05, and ``squeue --json``/``sinfo --json`` there):
  numbers are plain integers, a job's ``job_state`` is one word (``"RUNNING"``), a node's ``state``
  one word with its flags beside it (``"idle"``, ``state_flags: ["DRAIN"]``), and a job asks for
  GPUs in ``tres_per_node`` as ``gres:gpu:h200:8``.
- the ``data_parser`` plugins ``v0.0.40`` to ``v0.0.44`` (Slurm 23.11 to 25.11, slurmrestd and the
  CLI's ``--json`` alike): most numbers are objects, ``{"set": true, "infinite": false, "number": 8}``
  (``set: false``: no value; ``infinite: true``: unlimited), a job's ``job_state`` and a node's
  ``state`` are lists of words (the base state, then its flags), and ``tres_per_node`` reads
  ``gres/gpu:h200:8``.

``job_record`` and ``node_record`` turn either into the one shape the backend reads (the
``v0.0.38`` one, every number an ``int``), at the transports' edge; ``slurm_number`` is the one place
that reads a number in either form. Nothing here imports Django: it is plain parsing.
"""

from __future__ import annotations

import math
import re

ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING"}
# Jobs Slurm ended because their node died: the machine is lost, not stopped.
NODE_LOST = {"NODE_FAIL", "BOOT_FAIL"}
UNHEALTHY = {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "ERROR", "INVAL", "UNKNOWN"}

# The flags that name a job's state when set, in the order Slurm's own ``job_state_string`` tests
# them (src/common/slurm_protocol_defs.c): a RUNNING job with COMPLETING set is "COMPLETING", as
# Slurm 22.05's one word said. The data_parser plugins list the base state and its flags instead.
_STATE_FLAGS = (
    "COMPLETING",
    "STAGE_OUT",
    "CONFIGURING",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "STOPPED",
    "REVOKED",
    "RESV_DEL_HOLD",
    "SIGNALING",
)

# The numbers of a job and a node that the backend reads (the others pass through untouched).
_JOB_NUMBERS = ("job_id", "priority", "submit_time", "preempt_time", "restart_cnt", "node_count")

# Slurm's words for a controller that is unreachable or busy (the tools' and slurmrestd's alike): worth
# retrying, where any other refusal is not.
TRANSIENT_ERROR = re.compile(
    r"Unable to contact|Socket timed out|Connection refused|Zero Bytes|try again|temporarily|busy", re.I
)

_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?:(?P<count>\d+)")


def slurm_number(value) -> int | float | None:
    """A Slurm number in either form: ``8``, or ``{"set": true, "infinite": false, "number": 8}``.

    ``None`` when it has no value (``set: false``, absent, or unreadable); ``math.inf`` when it is
    unlimited (``infinite: true``, where ``set`` and ``number`` are to be ignored, as the schema's
    ``uint32_no_val``/``uint64_no_val`` say)."""
    if isinstance(value, dict):
        if value.get("infinite"):
            return math.inf
        if not value.get("set", "number" in value):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else number


def slurm_count(value, default: int = 0) -> int:
    """A Slurm number as a finite ``int`` (a count, an id, a time in seconds): ``default`` when it has
    no value or is unlimited."""
    number = slurm_number(value)
    if number is None or number == math.inf:
        return default
    return int(number)


def _words(value) -> list[str]:
    """A state as its words: ``"idle+drain"``, ``"MIXED DRAIN"`` or ``["MIXED", "DRAIN"]``."""
    listed = value if isinstance(value, list) else [value]
    return [w.upper() for item in listed if item for w in re.split(r"[+ ]", str(item)) if w]


def job_state(job: dict) -> str:
    """A job's state as one word, as ``squeue`` prints it: its flag when one names it, else its base."""
    words = _words(job.get("job_state") or "")
    for flag in _STATE_FLAGS:
        if flag in words[1:]:
            return flag
    return words[0] if words else ""


def job_record(raw: dict) -> dict:
    """A job from ``GET /jobs`` or ``squeue --json`` (any version) in the shape the backend reads:
    ``job_state`` one word, the numbers it reads plain ``int``s (0 when unset), ``tres_per_node`` as
    ``gres:gpu:TYPE:N``. Every other field is kept as Slurm wrote it."""
    job = dict(raw)
    job["job_state"] = job_state(raw)
    for name in _JOB_NUMBERS:
        if name in raw:
            job[name] = slurm_count(raw[name])
    tres = str(raw.get("tres_per_node") or "")
    if tres.startswith("gres/"):
        job["tres_per_node"] = "gres:" + tres.removeprefix("gres/")
    return job


def node_record(raw: dict) -> dict:
    """A node from ``GET /nodes`` or ``sinfo --json`` (any version) in the shape the backend reads:
    ``state`` its base word, ``state_flags`` the others."""
    node = dict(raw)
    words = _words(raw.get("state") or "")
    node["state"] = words[0].lower() if words else ""
    node["state_flags"] = [*words[1:], *(_words(raw.get("state_flags") or []))]
    return node


def gres_gpus(gres: str) -> tuple[str, int]:
    """``("h200", 8)`` from a node's ``gpu:h200:8(S:0-1),shard:…``; ``("", 0)`` when it has no GPUs."""
    for part in re.split(r",(?![^(]*\))", gres or ""):
        match = _GRES.match(part.strip())
        if match:
            return match["type"] or "", int(match["count"])
    return "", 0


def node_states(node: dict) -> set[str]:
    """Every state word of a node: the base state (``idle``, ``down``…) and its flags (``DRAIN``…)."""
    return set(_words(node.get("state") or "")) | set(_words(node.get("state_flags") or []))


def node_detail(node: dict) -> str:
    """What the staff's fleet page says of a node beyond its health: its odd states and Slurm's reason."""
    states = sorted(node_states(node) - {"IDLE", "MIXED", "ALLOCATED"})
    reason = str(node.get("reason") or "").strip()
    return ", ".join(filter(None, ["+".join(states), reason]))


def job_key(job: dict, prefix: str) -> str | None:
    name = str(job.get("name") or "")
    return name[len(prefix) :] if name.startswith(prefix) else None


def queue_position(job: dict, jobs: list[dict]) -> int:
    """1 + the pending jobs of the same partition that Slurm will consider first (higher priority, or
    the same priority and submitted earlier): the job's place in the line."""
    partition = job.get("partition")

    def order(j: dict) -> tuple:
        return (-slurm_count(j.get("priority")), slurm_count(j.get("submit_time")), slurm_count(j.get("job_id")))

    mine = order(job)
    ahead = [
        j
        for j in jobs
        if job_state(j) == "PENDING" and j.get("partition") == partition and j.get("job_id") != job.get("job_id")
    ]
    return 1 + sum(1 for j in ahead if order(j) < mine)


def hostlist_expand(nodes: str) -> list[str]:
    """Slurm's host list (``gpu[01-02,05],cpu1``) as node names."""
    names: list[str] = []
    for stem, inner, plain in re.findall(r"([^,\[]+)\[([^\]]*)\]|([^,\[\]]+)", nodes):
        if plain:
            names.append(plain)
            continue
        for part in inner.split(","):
            low, _, high = part.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                continue
            names += [f"{stem}{i:0{len(low)}d}" for i in range(int(low), int(high or low) + 1)]
    return names
