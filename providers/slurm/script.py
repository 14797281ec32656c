"""The batch script a Slurm job of the console runs: rendered from the backend's options.

The script is the one thing of the job that runs before the console's own program, as the tenant's
user: so it first checks that it is that user (a node that does not know it, or a job that somehow
runs as root, stops there), then hands each node to ``python -m providers.slurm.job`` with ``srun``.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from providers.base import PermanentBackendError, Tenant
from providers.slurm.pod import ENGINES


def nccl_env(options: dict) -> dict[str, str]:
    """``NCCL_ENV``, checked: names as a shell variable's, values as strings (quoted when exported)."""
    env = {str(k): str(v) for k, v in (options.get("NCCL_ENV") or {}).items()}
    bad = [name for name in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)]
    if bad:
        raise PermanentBackendError(f"NCCL_ENV names must be environment variable names, not {', '.join(bad)}.")
    return env


def engine(options: dict) -> str:
    """``ENGINE``: "podman" (the default, as on the local backend: the instance's image in a rootless
    container) or "process" (the servers as the tenant's processes: only where the region asks for it)."""
    value = str(options.get("ENGINE") or "podman")
    if value not in ENGINES:
        raise ImproperlyConfigured(f"The Slurm backend's ENGINE must be one of {', '.join(ENGINES)}, not {value!r}.")
    return value


def job_script(*, options: dict, root: Path, key: str, services: Sequence[str], tenant: Tenant, nodes: int = 1) -> str:
    """The batch script of the instance's job: it refuses to run as anyone but the tenant, exports
    the fabric's NCCL settings for a cluster, and starts ``python -m providers.slurm.job`` on every
    node with ``srun``."""
    o = options
    python = o.get("PYTHON") or sys.executable
    console_dir = str(o.get("CONSOLE_DIR") or settings.BASE_DIR)
    args = [
        python,
        "-m",
        "providers.slurm.job",
        f"--root={root}",
        f"--key={key}",
        f"--services={','.join(services)}",
        f"--engine={engine(o)}",
        f"--url-prefix={getattr(settings, 'CONSOLE_PROXY_PREFIX', '/i/')}",
        f"--bind={o.get('BIND', '127.0.0.1')}",
        f"--port-low={o.get('PORT_LOW', 20000)}",
        f"--port-high={o.get('PORT_HIGH', 29999)}",
        f"--ports-dir={o.get('PORTS_DIR', '/tmp/console-slurm-ports')}",  # noqa: S108 (node-local on purpose)
    ]
    if o.get("REGISTRIES_INSECURE") is not None:
        args.append(f"--registries-insecure={','.join(o['REGISTRIES_INSECURE'])}")
    if o.get("JUPYTER_BIN"):
        args.append(f"--jupyter-bin={o['JUPYTER_BIN']}")
    if o.get("CODE_SERVER_ENTRY"):
        args.append(f"--code-server-entry={o['CODE_SERVER_ENTRY']}")
    if o.get("NVIDIA_SMI"):
        args.append(f"--nvidia-smi={o['NVIDIA_SMI']}")
    # The public models and datasets, on the shared filesystem, read-only in every instance.
    args += [f"--public-mount={path}={source}" for path, source in sorted((o.get("PUBLIC_MOUNTS") or {}).items())]
    srun = os.path.join(o["BIN_DIR"], "srun") if o.get("BIN_DIR") else "srun"
    # A cluster's ranks talk over the fabric: NCCL's settings reach every rank through srun's export.
    fabric = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in nccl_env(o).items())
    return (
        "#!/bin/bash\n"
        f"# The console's instance {key}: its servers on the first node, every node reporting.\n"
        "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        # A node that does not know the tenant's user (site-provisioned users) says so, and a job
        # never goes on as anyone else.
        f'if [ "$(id -u)" != {tenant.uid} ] || [ "$(id -u)" = 0 ]; then\n'
        f'  echo "console: this job must run as {tenant.name} (uid {tenant.uid}), not $(id -un) (uid $(id -u))" >&2\n'
        "  exit 1\nfi\n"
        "export SLURM_EXPORT_ENV=ALL\n"
        f"{fabric if nodes > 1 else ''}"
        f"cd {shlex.quote(console_dir)}\n"
        f"export PYTHONPATH={shlex.quote(console_dir)}\n"
        f"exec {shlex.quote(srun)} --ntasks-per-node=1 --kill-on-bad-exit=1 {shlex.join(args)}\n"
    )
