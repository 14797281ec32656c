"""The command-line transport to Slurm: ``sbatch``, ``squeue --json``, ``scancel``, ``sinfo --json``.

What the backend uses when it has no ``REST_URL``: the tools on the console's host, reading
``SLURM_CONF``. Each job is submitted as its tenant (``sbatch --uid``), so the console runs as root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

from providers.base import PermanentBackendError, TransientBackendError
from providers.slurm.records import TRANSIENT_ERROR, job_record, node_record


class SlurmCli:
    """The command-line tools: ``sbatch`` (script on stdin), ``squeue --json``, ``scancel``, ``sinfo --json``.

    Slurm 22.05's ``squeue --json`` ignores filters and lists every job it knows (recently ended ones
    too, for ``MinJobAge``), which is what ``poll`` wants anyway: one call sees the whole queue. From
    23.11 on the tools write the data_parser's JSON (number objects, state lists): ``records`` reads
    both.
    """

    def __init__(self, *, bin_dir: str = "", slurm_conf: str = "", timeout: float = 15.0) -> None:
        self.bin_dir = bin_dir
        self.env = {**os.environ, **({"SLURM_CONF": slurm_conf} if slurm_conf else {})}
        self.timeout = timeout

    def _run(self, tool: str, *args: str, stdin: str | None = None) -> str:
        path = os.path.join(self.bin_dir, tool) if self.bin_dir else (shutil.which(tool) or tool)
        try:
            done = subprocess.run(  # noqa: S603 (fixed tools, arguments from the backend)
                [path, *args],
                input=stdin,
                capture_output=True,
                text=True,
                env=self.env,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise PermanentBackendError(f"Slurm's {tool} is not installed on the console's host.") from exc
        except subprocess.TimeoutExpired as exc:
            raise TransientBackendError(f"Slurm's {tool} did not answer within {self.timeout:.0f} s.") from exc
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
            text = f"{tool}: {message[0][:300]}"
            # The controller unreachable (or busy) is worth retrying; a refused request is not.
            if TRANSIENT_ERROR.search(text):
                raise TransientBackendError(text)
            raise PermanentBackendError(text)
        return done.stdout

    def submit(self, *, script: str, job: dict) -> int:
        args = ["--parsable", f"--job-name={job['name']}", f"--nodes={job['nodes']}", "--ntasks-per-node=1"]
        args += [f"--gres={job['gres']}"] if job["gres"] else []  # none: a run without GPU
        args += [f"--cpus-per-task={job['cpus_per_task']}", f"--chdir={job['cwd']}"]
        if job.get("memory_mb"):
            args.append(f"--mem={job['memory_mb']}M")
        args += [f"--output={job['output']}", "--export=NONE"]
        if job.get("uid"):
            # As the tenant: only root may name another user's uid (``sbatch --uid``).
            args += [f"--uid={job['uid']}", f"--gid={job['uid']}"]
        # A requeued run appends to the log instead of truncating the previous run's.
        args += ["--requeue", "--open-mode=append"] if job.get("requeue") else ["--no-requeue"]
        if job.get("partition"):
            args.append(f"--partition={job['partition']}")
        if job.get("comment"):
            args.append(f"--comment={job['comment']}")
        args += list(job.get("extra", ()))
        try:
            out = self._run("sbatch", *args, stdin=script).strip()
        except PermanentBackendError as exc:
            if job.get("uid") and re.search(r"uid|root", str(exc), re.I):
                raise PermanentBackendError(
                    f"{exc}. The command-line path submits each job as its tenant (sbatch --uid), which needs the "
                    "console to run as root; otherwise use slurmrestd (REST_URL with JWT_KEY_FILE)."
                ) from exc
            raise
        try:
            return int(out.split(";")[0])
        except ValueError as exc:
            raise TransientBackendError(f"sbatch answered {out[:200]!r}") from exc

    def jobs(self) -> list[dict]:
        return [job_record(j) for j in _json(self._run("squeue", "--json"), "squeue").get("jobs", [])]

    def cancel(self, job_id: int, *, user: str = "") -> None:
        self._run("scancel", str(job_id))

    def nodes(self) -> list[dict]:
        return [node_record(n) for n in _json(self._run("sinfo", "--json"), "sinfo").get("nodes", [])]


def _json(text: str, tool: str) -> dict:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise TransientBackendError(f"{tool} --json gave unreadable output") from exc
