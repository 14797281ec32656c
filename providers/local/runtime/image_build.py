"""The console's image builder on a local host: a recipe (a Containerfile) built with ``podman build``
(runc, as every container here) and pushed to the console's registry (``ContainerRuntime.image_build``).

The recipe is the owner's, so hostile: the console has already refused what it must not hold (a
``FROM`` outside its registry or of an image the owner may not use, ``ADD``, ``RUN --mount``…;
``instances.services.image_build``). Here it is also held in:

- **No build context:** an empty folder. Files come only from images (``COPY --from``).
- **The owner's uid range:** ``--userns-uid-map/--userns-gid-map 0:BASE:COUNT``, as their instances
  run; the built layer is then shifted back to the image's own uids (``layout_fix``), as a save's is.
- **Limits:** CPUs (CFS quota), memory (no swap), processes (``nproc``), and a wall-clock limit after
  which the build is killed.
- **Network:** ``none`` by default: no step reaches anything. ``tenant``: the steps join the network
  namespace of a holder container on the owner's own instance network, behind the firewall its
  instances have (``firewall.py``: not this host's services, not the cloud's metadata), so ``apt-get``
  and ``pip`` reach the mirrors an instance of theirs reaches. ``podman build --network`` takes no
  named network in podman 4.3, hence the holder. The steps then see this host's ``/sys`` read-only: a
  build's user namespace does not own the holder's network namespace, so runc may not mount a sysfs
  of its own (``operation not permitted``), as with ``podman run --network=host`` in a user namespace.

``podman build --layers=false`` commits one layer on top of the base for the whole recipe, so the
result is the base plus one layer, like a save.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from providers.local.runtime import firewall as firewall_rules
from providers.local.runtime.base import LocalRuntimeError
from providers.local.runtime.container_spec import _network_name, _registry_of
from providers.local.runtime.image_save import ImageSaveError, layout_fix, pulled_bytes
from providers.local.runtime.podman import PodmanError, last_words

LOG_TAIL = 64 << 10  # what ``progress`` is handed: the log's last 64 KiB


def _tail(path: Path, limit: int = LOG_TAIL) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def build_argv(
    *,
    containerfile: Path,
    context: Path,
    local: str,
    tenant: Mapping,
    limits: Mapping,
    network: str,
    tls_verify: bool,
    auth_file: str = "",
) -> list[str]:
    """The ``podman build`` command line of one build (pure: tested without podman)."""
    base, count = int(tenant["uid_base"]), int(tenant["uid_count"])
    period = 100000
    memory = f"{int(float(limits['memory_gb']) * 1024)}m"
    argv = [
        "build",
        "--pull=missing",
        f"--tls-verify={'true' if tls_verify else 'false'}",
        "--layers=false",
        "--isolation=oci",
        f"--userns-uid-map=0:{base}:{count}",
        f"--userns-gid-map=0:{base}:{count}",
        f"--cpu-period={period}",
        f"--cpu-quota={int(float(limits['cpus']) * period)}",
        f"--memory={memory}",
        f"--memory-swap={memory}",
        f"--ulimit=nproc={int(limits['pids'])}:{int(limits['pids'])}",
        f"--network={network}",
        *(["--volume=/sys:/sys:ro"] if network.startswith("ns:") else []),
        "--no-cache",
        "-f",
        str(containerfile),
        "-t",
        local,
    ]
    if auth_file:
        argv += ["--authfile", auth_file]
    return [*argv, str(context)]


def image_build(
    runtime,
    *,
    recipe: str,
    repository: str,
    tag: str,
    tenant: Mapping,
    limits: Mapping,
    auth_file: str = "",
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Build ``recipe`` and push it to ``repository:tag`` (see the module's docstring); returns
    ``{"digest", "size_bytes", "log"}``. A failed or timed-out build is a ``LocalRuntimeError`` ending
    with the log's last lines; podman or the registry failing is a ``PodmanError``."""
    skopeo = shutil.which("skopeo")
    if not skopeo:
        raise LocalRuntimeError("skopeo is not installed (run `make container-deps`)")
    build_id = uuid.uuid4().hex[:16]
    scratch = runtime.root / "builds" / build_id
    context = scratch / "context"
    context.mkdir(parents=True)
    scratch.chmod(0o700)
    containerfile = scratch / "Containerfile"
    containerfile.write_text(recipe)
    log = scratch / "build.log"
    local = f"localhost/console-build/{build_id}:latest"
    holder = f"console-build-{build_id}"
    host = _registry_of(repository)
    insecure = host in runtime.registries_insecure or host.split(":")[0] in runtime.registries_insecure
    podman = runtime.podman
    try:
        network = "none"
        if limits.get("network") == "tenant":
            network = _holder_network(runtime, holder, recipe=recipe, tenant=tenant, insecure=insecure, limits=limits)
        argv = build_argv(
            containerfile=containerfile,
            context=context,
            local=local,
            tenant=tenant,
            limits=limits,
            network=network,
            tls_verify=not insecure,
            auth_file=auth_file,
        )
        # podman's own TMPDIR (/var/tmp), not one under ``scratch``: the build's steps run in the owner's
        # uid range, which must reach the rootfs buildah mounts there (a folder under root's 0700 one cannot).
        process = podman.popen(argv, log=log)
        deadline = time.monotonic() + float(limits["timeout_s"])
        said = ""
        while process.poll() is None:
            if time.monotonic() > deadline:
                process.kill()
                process.wait(timeout=30)
                raise LocalRuntimeError(
                    f"the build ran past its limit of {int(limits['timeout_s'])} s and was stopped: "
                    + last_words(_tail(log))
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=2)
            now = _tail(log)
            if progress is not None and now != said:
                progress(now)
                said = now
        text = _tail(log)
        if progress is not None and text != said:
            progress(text)
        if process.returncode != 0:
            raise LocalRuntimeError(f"the build failed: {last_words(text) or 'podman build failed'}")
        layout = scratch / "layout"
        runtime._skopeo([skopeo, "copy", "--quiet", f"containers-storage:{local}", f"dir:{layout}"], timeout=900)
        info = podman.inspect("image", local) or {}
        config = info.get("Config") or {}
        try:
            layout_fix(
                layout,
                uid_base=int(tenant["uid_base"]),
                uid_count=int(tenant["uid_count"]),
                entrypoint=list(config.get("Entrypoint") or []),
                cmd=list(config.get("Cmd") or []),
            )
        except ImageSaveError as exc:
            raise LocalRuntimeError(str(exc)) from exc
        tls = "false" if insecure else "true"
        digest_file = scratch / "digest"
        push = [skopeo, "copy", "--quiet", "--digestfile", str(digest_file), f"--dest-tls-verify={tls}"]
        if auth_file:
            push += ["--dest-authfile", auth_file]
        runtime._skopeo([*push, f"dir:{layout}", f"docker://{repository}:{tag}"], timeout=900)
        digest = digest_file.read_text().strip()
        inspect = [skopeo, "inspect", "--raw", f"--tls-verify={tls}"]
        if auth_file:
            inspect += ["--authfile", auth_file]
        raw = runtime._skopeo([*inspect, f"docker://{repository}@{digest}"], timeout=120)
        return {"digest": digest, "size_bytes": pulled_bytes(json.loads(raw), len(raw.encode())), "log": text}
    finally:
        podman.run("rm", "--force", "--time", "0", holder, check=False, timeout=60)
        podman.run("rmi", "--force", local, check=False, timeout=120)
        shutil.rmtree(scratch, ignore_errors=True)


def _holder_network(runtime, holder: str, *, recipe: str, tenant: Mapping, insecure: bool, limits: Mapping) -> str:
    """``ns:<path>`` of a holder container's network namespace on the tenant's fenced network: the
    build's steps join it (see the module's docstring). The holder is the recipe's base image running
    ``sleep``, in the tenant's uid range."""
    base = next(
        (line.split()[1] for line in recipe.splitlines() if line.strip().upper().startswith("FROM ")),
        "",
    )
    if not base:
        raise LocalRuntimeError("the recipe has no FROM")
    runtime._network_ensure(tenant)
    network = _network_name(tenant)
    if runtime.firewall:
        subnets = runtime.network_subnets(network)
        try:
            firewall_rules.ensure(subnets, deny=runtime.egress_deny)
        except (firewall_rules.FirewallError, OSError, subprocess.SubprocessError) as exc:
            raise LocalRuntimeError(f"the build's firewall could not be set, so it did not run: {exc}") from exc
    uid_base, count = int(tenant["uid_base"]), int(tenant["uid_count"])
    runtime.podman.run(
        "run", "-d", "--rm", "--name", holder, "--network", network,
        f"--tls-verify={'false' if insecure else 'true'}",
        "--uidmap", f"0:{uid_base}:{count}", "--gidmap", f"0:{uid_base}:{count}",
        "--memory=64m", "--pids-limit=16", "--entrypoint", "sleep", base, str(int(limits["timeout_s"]) + 60),
        timeout=900,
    )  # fmt: skip
    info = runtime.podman.inspect("container", holder) or {}
    sandbox = (info.get("NetworkSettings") or {}).get("SandboxKey") or ""
    if not sandbox:
        pid = int((info.get("State") or {}).get("Pid") or 0)
        if not pid:
            raise PodmanError("the build's network holder did not start")
        sandbox = f"/proc/{pid}/ns/net"
    return f"ns:{sandbox}"
