"""slurmrestd's OpenAPI versions: which one to speak, and how a job is written in each.

slurmrestd serves several versions of its API side by side, one path prefix each
(``/slurm/v0.0.41/jobs/``), and says which in its OpenAPI document (``GET /openapi/v3``). The console
speaks:

==========  =====================  ==============================================================
version     served by Slurm        what changed for the console
==========  =====================  ==============================================================
``v0.0.38`` 22.05, 23.02, 23.11    the first it spoke: plain integers; ``gres`` and an
                                   ``environment`` object in the job description
``v0.0.40`` 23.11 to 25.05         numbers as ``{"set", "infinite", "number"}`` objects; states as
                                   lists; ``tres_per_node`` instead of ``gres``; the environment a
                                   list of ``NAME=value``; ``open_mode`` a list; ``nodes`` a
                                   string; the script inside ``job``
``v0.0.41`` 24.05 to 25.11         as v0.0.40, for the fields the console uses
``v0.0.42`` 24.11 to 25.11         as v0.0.41; the submit answer without the deprecated ``result``
``v0.0.43`` 25.05, 25.11           as v0.0.42, for the fields the console uses; answers add fields
                                   it does not read (a job's ``std*_expanded``, a node's
                                   ``topology``)
``v0.0.44`` 25.11                  as v0.0.43, for the fields the console uses; a job's
                                   ``step_id`` object and ``submit_line`` added, and state words
                                   (``EXPEDITING``; a node's ``EXTERNAL``, ``BLOCKED``) it need
                                   not know
==========  =====================  ==============================================================

SchedMD's "Slurm OpenAPI Plugin Release Notes" (``doc/html/openapi_release_notes/``) list every
change, release by release: 25.05 serves v0.0.40 (deprecated from 25.05.1) to v0.0.43, and 25.11
v0.0.41 (deprecated) to v0.0.44, v0.0.40 removed. ``v0.0.39`` is not spoken: every release that
serves it also serves ``v0.0.38`` or ``v0.0.40``, which is chosen there.

The tests serve each version's answers in its own format (``tests/fixtures/``, where each comes
from is in its README): v0.0.43 and v0.0.44 are written to the release notes' schema changes, not
recorded from a 25.x server; ``REST_API="v0.0.42"`` pins a version both 25.05 and 25.11 still serve.

``choose`` takes the newest version the server offers that the console speaks; ``Dialect`` writes a
job description and reads the submit answer in it. The answers' numbers and states are read the
same way for every version (``records.job_record``, ``records.node_record``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Newest first: the order ``choose`` prefers them in.
SUPPORTED = ("v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.38")
# Where a server's OpenAPI document is (the first it answers: 22.05 and later serve all three).
OPENAPI_PATHS = ("/openapi/v3", "/openapi.json", "/openapi")

_VERSION = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/")


def offered(document: dict) -> set[str]:
    """The ``/slurm/`` API versions an OpenAPI document has paths for (``slurmdb`` is not needed)."""
    paths = document.get("paths") if isinstance(document, dict) else None
    return {m[1] for path in (paths or {}) if (m := _VERSION.match(str(path)))}


def choose(document: dict) -> str | None:
    """The newest version in both the server's document and ``SUPPORTED``; ``None`` when none is."""
    versions = offered(document)
    return next((v for v in SUPPORTED if v in versions), None)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def no_val(number: int) -> dict:
    """A number as the data_parser plugins want one (``uint32_no_val``/``uint64_no_val``)."""
    return {"set": True, "infinite": False, "number": int(number)}


# The job's environment is the script's own (as ``--export=NONE`` on the command line).
JOB_ENVIRONMENT = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class Dialect:
    """How the console writes to one API version of slurmrestd (``version``: ``"v0.0.41"``)."""

    version: str

    @property
    def structured(self) -> bool:
        """The data_parser generation (v0.0.40 and later): number objects, lists, ``tres_per_node``."""
        return _key(self.version) >= (0, 0, 40)

    def path(self, path: str) -> str:
        """``/jobs`` under this version's prefix. The data_parser generation's document writes its
        collections with a trailing slash (``/slurm/v0.0.41/jobs/``); 22.05's without."""
        if self.structured and path in ("/jobs", "/nodes"):
            path += "/"
        return f"/slurm/{self.version}{path}"

    def submit_body(self, *, script: str, job: dict) -> dict:
        """The ``POST /job/submit`` body for the backend's ``job`` (``SlurmBackend._submit``).

        v0.0.38 (``v0.0.38_job_submission``): ``{"script", "job": v0.0.38_job_properties}``.
        v0.0.40+ (``v0.0.4x_job_submit_req``): ``{"job": v0.0.4x_job_desc_msg}`` with the script in
        it (the top-level ``script`` is deprecated from v0.0.42 on)."""
        if not self.structured:
            desc = {
                "name": job["name"],
                "nodes": job["nodes"],
                "tasks": job["nodes"],
                "tasks_per_node": 1,
                "cpus_per_task": job["cpus_per_task"],
                **({"gres": job["gres"]} if job["gres"] else {}),  # none: a run without GPU
                **({"memory_per_node": job["memory_mb"]} if job.get("memory_mb") else {}),
                "current_working_directory": job["cwd"],
                "standard_output": job["output"],
                "requeue": bool(job.get("requeue")),
                "environment": dict(JOB_ENVIRONMENT),
            }
            if job.get("requeue"):
                desc["open_mode"] = "append"
            if job.get("switches"):
                desc["required_switches"] = job["switches"]
        else:
            desc = {
                "name": job["name"],
                "script": script,
                "nodes": str(job["nodes"]),
                "minimum_nodes": job["nodes"],
                "maximum_nodes": job["nodes"],
                "tasks": job["nodes"],
                "tasks_per_node": 1,
                "cpus_per_task": job["cpus_per_task"],
                # GRES as a TRES: ``--gres=gpu:h200:8`` is ``tres_per_node=gres/gpu:h200:8`` (no ``gres`` field).
                **({"tres_per_node": f"gres/{job['gres']}"} if job["gres"] else {}),
                **({"memory_per_node": no_val(job["memory_mb"])} if job.get("memory_mb") else {}),
                "current_working_directory": job["cwd"],
                "standard_output": job["output"],
                "requeue": bool(job.get("requeue")),
                "environment": [f"{name}={value}" for name, value in JOB_ENVIRONMENT.items()],
            }
            if job.get("requeue"):
                desc["open_mode"] = ["APPEND"]
            if job.get("switches"):
                desc["required_switches"] = no_val(job["switches"])
        if job.get("required_nodes"):
            desc["required_nodes"] = list(job["required_nodes"])
        if job.get("partition"):
            desc["partition"] = job["partition"]
        if job.get("comment"):
            desc["comment"] = job["comment"]
        desc.update(job.get("rest_extra") or {})
        return {"script": script, "job": desc} if not self.structured else {"job": desc}

    @staticmethod
    def submitted_id(data: dict) -> int | None:
        """The new job's id: ``job_id`` at the top (every version); v0.0.40 and v0.0.41 repeat it in
        their deprecated ``result`` object, which a proxy in between might keep alone."""
        for value in (data.get("job_id"), (data.get("result") or {}).get("job_id")):
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
            if isinstance(value, str) and value.isdigit():
                return int(value)
        return None


def errors(data: dict) -> list[str]:
    """The errors of an answer, in words: v0.0.38's ``{"error", "errno"}`` (``error_number`` in some
    releases) and the data_parser's ``{"description", "error", "error_number", "source"}``."""
    found = []
    for item in data.get("errors") or ():
        if not isinstance(item, dict) or not (item.get("error_number") or item.get("errno") or item.get("error")):
            continue
        words = [str(item[k]) for k in ("error", "description") if item.get(k)]
        found.append(": ".join(dict.fromkeys(words)) or f"error {item.get('error_number') or item.get('errno')}")
    return found
