"""Check the console's GPU code on a real NVIDIA host, and record what it read for the tests.

The console reads cards through ``nvidia-smi`` (discovery, the 15 s samples behind the charts and
idle-stop, the processes on each card) and passes them to containers through CDI. The suite runs
that code on output recorded from real hosts; this script is how those recordings are made, and how
a GPU host is checked before it joins a fleet::

    python3 scripts/gpu_check.py --out DIR [--load-s 6]

It imports no Django (as the Slurm job on a compute node), so it runs with any Python 3.11+ and
PyYAML. It reads every card idle, then again while a CUDA program (PyTorch, when the host has it)
keeps one busy, and checks that the busy card shows utilisation, memory and the program's pid. It
writes the raw answers to DIR (``nvidia-smi-*.csv``, ``cdi-*.yaml``) and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from providers.local.runtime.cdi import cdi_devices, cdi_spec_devices
from providers.local.runtime.gpus import (
    NVIDIA_SMI_APPS_ARGS,
    NVIDIA_SMI_ARGS,
    NVIDIA_SMI_SAMPLE_ARGS,
    gpu_discover,
    gpu_read,
    parse_nvidia_smi_apps,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_samples,
)
from providers.slurm.job import job_cards

# A CUDA program that keeps card 0 busy for a while and holds a few GiB on it.
LOAD = """
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(50):
        a @ a
    torch.cuda.synchronize()
"""


def _smi(args: tuple[str, ...]) -> str:
    argv = ["nvidia-smi", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout  # noqa: S603


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--load-s", type=float, default=8.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"problems": []}

    def problem(text: str) -> None:
        result["problems"].append(text)
        print("PROBLEM:", text, flush=True)

    if not shutil.which("nvidia-smi"):
        print(json.dumps({"nvidia_smi": False}))
        return 1

    # Discovery, as the local backend does it at start.
    raw = _smi(NVIDIA_SMI_ARGS)
    (args.out / "nvidia-smi-query.csv").write_text(raw)
    inventory = gpu_discover()
    result["cards"] = len(inventory.gpus)
    result["model_slug"] = inventory.model_slug
    result["simulated"] = inventory.simulated
    if inventory.simulated or not inventory.gpus:
        problem(f"discovery fell back to simulated cards: {inventory.detail}")
    if [g.index for g in parse_nvidia_smi_csv(raw)] != [g.index for g in inventory.gpus]:
        problem("the recorded query and the live discovery disagree")
    print("discovered:", [(g.index, g.name, g.memory_total_mib, g.uuid) for g in inventory.gpus], flush=True)

    # Samples, idle.
    idle_raw = _smi(NVIDIA_SMI_SAMPLE_ARGS)
    (args.out / "nvidia-smi-sample-idle.csv").write_text(idle_raw)
    idle = gpu_read()
    result["idle"] = {i: [r.utilization_pct, r.memory_used_mib, r.power_w, r.temperature_c] for i, r in idle.items()}
    if set(idle) != {g.index for g in inventory.gpus}:
        problem("samples and discovery name different cards")

    # Samples under load: card 0 busy with a CUDA program of ours.
    load = None
    try:
        if importlib.util.find_spec("torch") is None:  # the load runs in a child process of its own
            raise ImportError("torch")
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
            script.write(LOAD)
        load = subprocess.Popen(  # noqa: S603 - our own script
            [sys.executable, script.name, str(args.load_s)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"},
        )
        assert load.stdout is not None
        load.stdout.readline()  # "ready": the context and the memory are held
        time.sleep(2.0)
        readings, busy_raw, apps_raw = {}, "", ""
        for _ in range(5):  # utilisation is an average over the driver's last sample period
            busy_raw, apps_raw = _smi(NVIDIA_SMI_SAMPLE_ARGS), _smi(NVIDIA_SMI_APPS_ARGS)
            readings = gpu_read()
            if (readings[0].utilization_pct or 0) >= 50 and readings[0].processes:
                break
            time.sleep(1.0)
        (args.out / "nvidia-smi-sample-busy.csv").write_text(busy_raw)
        (args.out / "nvidia-smi-apps-busy.csv").write_text(apps_raw)
        busy = readings[0]
        result["busy"] = {
            "utilization_pct": busy.utilization_pct,
            "memory_used_mib": busy.memory_used_mib,
            "power_w": busy.power_w,
            "processes": [(p.pid, p.name, p.memory_used_mib) for p in busy.processes],
            "load_pid": load.pid,
        }
        if (busy.utilization_pct or 0) < 50:
            problem(f"card 0 under load reads {busy.utilization_pct}% busy")
        if (busy.memory_used_mib or 0) < 4096:
            problem(f"card 0 holds 4 GiB but reads {busy.memory_used_mib} MiB used")
        pids = [p.pid for p in busy.processes]
        result["busy"]["pid_seen"] = load.pid in pids
        if not pids:
            problem("no process listed on the busy card")
        # A sandboxed host may show the driver's view of pids (another namespace): recorded, not judged.
        parsed = parse_nvidia_smi_samples(busy_raw)
        apps = parse_nvidia_smi_apps(apps_raw)
        result["apps_by_uuid"] = {u: len(a) for u, a in apps.items()}
        # The Slurm job reports its cards in CUDA_VISIBLE_DEVICES order.
        result["job_cards_0"] = [r.index for r in job_cards(parsed, ["0"])]
    except ImportError:
        result["busy"] = "no torch on this host"
    finally:
        if load is not None:
            load.wait(timeout=args.load_s + 60)

    # CDI: the spec the container toolkit writes, and the --device values the console passes.
    ctk = shutil.which("nvidia-ctk")
    result["nvidia_ctk"] = bool(ctk)
    if ctk:
        spec_dir = args.out / "cdi"
        spec_dir.mkdir(exist_ok=True)
        generated = subprocess.run(  # noqa: S603 - the toolkit found on PATH
            [ctk, "cdi", "generate", f"--output={spec_dir / 'nvidia.yaml'}"],
            capture_output=True,
            text=True,
            check=False,
        )
        result["cdi_generate_rc"] = generated.returncode
        if generated.returncode == 0:
            result["cdi_devices"] = sorted(cdi_spec_devices([spec_dir]))
            result["cdi_args"] = cdi_devices(["0"], spec_dirs=[spec_dir])
        else:
            problem(f"nvidia-ctk cdi generate failed: {generated.stderr.strip()[:300]}")
    for folder in ("/etc/cdi", "/var/run/cdi"):
        if Path(folder).is_dir():
            result.setdefault("host_cdi", {})[folder] = sorted(cdi_spec_devices([folder]))

    print(json.dumps(result, sort_keys=True))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
