"""Benchmark: Save as image of a 1 GB change, on this host (issue #27: at most 30 s).

An instance's container as the local backend runs it (the minimal image, in a tenant's uid range, its
secrets folder mounted read-only, /run and /tmp on tmpfs) gets 1 GiB written into its own layer:
random bytes (gzip cannot shrink them: the worst case for the push), as files of 64 MiB under /opt.
Then ``ContainerRuntime.image_save`` (the code the console's worker runs) commits it, copies it out of
podman's store, shifts its uids back and drops the console's paths, and pushes it to a registry on
127.0.0.1 (Debian's ``docker-registry``, storage in a temporary folder). Printed: each phase and the
whole, then one JSON line.

No database, no Django: ``make container-deps images`` first (the minimal image must be built).

    .venv/bin/python bench/save_image.py [--mib 1024]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from providers.local.runtime.container_spec import SECRETS_PATH  # noqa: E402
from providers.local.runtime.containers import ContainerRuntime  # noqa: E402
from providers.local.runtime.podman import Podman  # noqa: E402

IMAGE = "localhost/console/minimal:latest"
UID_BASE = 3_100_000_000  # far above any range the console hands out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def registry_start(folder: Path) -> tuple[subprocess.Popen, str]:
    binary = shutil.which("docker-registry")
    if binary is None:
        sys.exit("docker-registry is not installed (make container-deps)")
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "registry.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'store'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)  # wall-clock: the registry starts in well under a second
    return process, f"127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="the change written into the container (MiB)")
    parser.add_argument("--commit", action="store_true", help="a local image: the commit path, not the direct push")
    args = parser.parse_args()
    podman = Podman()
    if podman.missing() or not podman.image_exists(IMAGE):
        sys.exit(podman.missing() or f"{IMAGE} is not built (make images)")
    scratch = Path(tempfile.mkdtemp(prefix="bench-save-image-"))
    runtime = ContainerRuntime(root=scratch / "instances", podman=podman)
    key = f"bench-{uuid.uuid4().hex[:8]}"
    name = runtime.container_name(key)
    registry, address = registry_start(scratch / "registry")
    paths = runtime.paths(key)
    try:
        paths.base.mkdir(parents=True)
        paths.secrets.mkdir()
        token = secrets.token_urlsafe(32)
        (paths.secrets / "lab_token").write_text(token + "\n")
        runtime._save_meta(  # what a start writes, as far as a save reads it
            paths,
            {
                "key": key,
                "tenant": {"uid_base": UID_BASE, "uid_count": 65536},
                "image": IMAGE,
                "secrets": {"lab": token},
            },
        )
        # As a launch runs it: the image pinned by digest in the registry it is saved to (the fast path:
        # only the change is read and pushed); --commit: a local image (podman commit, the fix, skopeo).
        image = IMAGE
        if not args.commit:
            podman.run("push", "--tls-verify=false", IMAGE, f"{address}/console/minimal:latest", timeout=600)
            inspect = subprocess.run(
                ["skopeo", "inspect", "--tls-verify=false", f"docker://{address}/console/minimal:latest"],
                capture_output=True, text=True, check=True, env=podman.env(),
            )  # fmt: skip
            image = f"{address}/console/minimal@{json.loads(inspect.stdout)['Digest']}"
            podman.run("pull", "--tls-verify=false", image, timeout=600)
            meta = runtime.meta(key)
            runtime._save_meta(paths, {**meta, "image": image})
        podman.run(
            "run", "-d", "--name", name, "--uidmap", f"0:{UID_BASE}:65536", "--gidmap", f"0:{UID_BASE}:65536",
            "--tmpfs", "/run:rw,exec,nosuid,nodev,size=64m,mode=0755", "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m",  # noqa: S108
            "-v", f"{paths.secrets}:{SECRETS_PATH}:ro", "--entrypoint", "/bin/sleep", image, "infinity",
            timeout=120,
        )  # fmt: skip
        clock = time.monotonic()
        files = max(1, args.mib // 64)
        write = (
            f"mkdir -p /opt/bench && for i in $(seq 1 {files}); do "
            f"head -c {args.mib * 2**20 // files} /dev/urandom > /opt/bench/blob-$i; done && chown -R 1000:1000 /opt/bench"
        )
        podman.run("exec", name, "sh", "-c", write, timeout=600)
        write_s = time.monotonic() - clock
        print(f"wrote {args.mib} MiB of random bytes into the container's layer in {write_s:.1f} s")

        clock = time.monotonic()
        saved = runtime.image_save(key, repository=f"{address}/users/u1/bench", tag="v1")
        save_s = time.monotonic() - clock
        for phase, seconds in saved["timings"].items():
            print(f"  {phase:>9}: {seconds:6.1f} s")
        print(f"saved as {address}/users/u1/bench@{saved['digest']}: {saved['size_bytes'] / 2**20:.0f} MiB pulled")
        print(
            f"save of a {args.mib} MiB change: {save_s:.1f} s (goal: 30 s for 1 GiB); {saved['shifted']} uids shifted"
        )
        print(f"path: {saved.get('path', 'commit')}")
        result = {
            "path": saved.get("path", "commit"),
            "change_mib": args.mib,
            "save_1gb_s" if args.mib == 1024 else "save_s": round(save_s, 2),
            **{key_: value for key_, value in saved["timings"].items()},
            "image_mib": round(saved["size_bytes"] / 2**20, 1),
            "files_shifted": saved["shifted"],
        }
        print(json.dumps(result))
    finally:
        podman.remove(name)
        registry.terminate()
        registry.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
