"""SSH through the console's gateway: ``gpuctl ssh-config`` writes an OpenSSH config entry per running
instance, and ``gpuctl port-forward`` carries a local port to one of the instance's ports over it.
"""

from __future__ import annotations

import json
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click

from gpuctl.cli_base import (
    EXIT_FAILED,
    EXIT_USAGE,
    Context,
    _fail,
    _resolve,
    cli,
    err,
    pass_ctx,
)
from gpuctl.messages import t


def _gateway(instance: dict) -> tuple[str, int, str] | None:
    """(host, port, login) of the console's SSH gateway for ``instance``, from its ``gateway_command``
    (``ssh -p 2222 <id>@<host>``): None while it does not run or the console has no gateway."""
    command = (instance.get("entry_points") or {}).get("gateway_command")
    if not command:
        return None
    words = shlex.split(command)
    port = int(words[words.index("-p") + 1]) if "-p" in words else 22
    login, _, host = words[-1].rpartition("@")
    return host, port, login


def _alias(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text).strip("-") or "instance"


@cli.command(name="ssh-config")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the entries to this file (replaced whole) instead of printing them.",
)
@click.option("-i", "--identity-file", default=None, help="The private key to use (one of your account's keys).")
@click.option("--prefix", default="", help="Put this before every host name, e.g. `gpu-` (several consoles).")
@pass_ctx
def ssh_config(ctx: Context, output: Path | None, identity_file: str | None, prefix: str) -> None:
    """OpenSSH `Host` entries for your running instances, through the console's SSH gateway, so plain
    `ssh train`, `scp`, `rsync` and VS Code Remote-SSH work by name.

    \b
      gpuctl ssh-config -o ~/.ssh/gpuctl.conf -i ~/.ssh/id_ed25519
      echo 'Include ~/.ssh/gpuctl.conf' >> ~/.ssh/config     # once; at the top of the file
      rsync -a ./data/ train:data/

    Each instance is named by its name (when no other running instance has it) and by the first
    8 characters of its id. Run it again after launching: only running instances are reachable.
    """
    running = list(ctx.client.instances_list(status=["running"]))
    names = [row["name"] for row in running]
    entries = []
    for instance in running:
        gateway = _gateway(instance)
        if gateway is None:
            continue
        host, port, login = gateway
        aliases = [prefix + _alias(instance["id"][:8])]
        if instance["name"] and names.count(instance["name"]) == 1:
            aliases.insert(0, prefix + _alias(instance["name"]))
        entries.append({"instance": instance["id"], "aliases": aliases, "hostname": host, "port": port, "user": login})
    text = _ssh_config_text(ctx, entries, identity_file)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    ctx.emit(
        {"entries": entries, "config": text, "output": str(output) if output else None},
        lambda: (
            err.print(t("Wrote {count} hosts to {path}.", count=len(entries), path=output), highlight=False)
            if output
            else click.echo(text, nl=False)
        ),
    )


def _ssh_config_text(ctx: Context, entries: list[dict], identity_file: str | None) -> str:
    lines = [f"# Written by `gpuctl ssh-config` for {ctx.client.url}: run it again to refresh; edits are lost.", ""]
    for entry in entries:
        lines += [
            f"Host {' '.join(entry['aliases'])}",
            f"    HostName {entry['hostname']}",
            f"    Port {entry['port']}",
            f"    User {entry['user']}",
        ]
        if identity_file:
            lines += [f"    IdentityFile {Path(identity_file).expanduser()}", "    IdentitiesOnly yes"]
        lines += ["    ServerAliveInterval 30", ""]
    return "\n".join(lines)


def _free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


@cli.command(name="port-forward")
@click.argument("ref")
@click.argument("ports")
@click.option("--address", default="127.0.0.1", show_default=True, help="The local address to listen on.")
@click.option("-i", "--identity-file", default=None, help="The private key to use (one of your account's keys).")
@click.option("-o", "--ssh-option", "ssh_options", multiple=True, help="An option for ssh, as ssh -o takes it.")
@pass_ctx
def port_forward(
    ctx: Context, ref: str, ports: str, address: str, identity_file: str | None, ssh_options: tuple[str, ...]
) -> None:
    """Forward a local port to a service port of an instance: PORTS is REMOTE, or LOCAL:REMOTE (LOCAL 0
    picks a free one). Runs until Ctrl-C.

    It goes through the console's SSH gateway (`ssh -N -L`), signing in with your SSH key: any TCP
    service works (HTTP, a database, TensorBoard), nothing need be declared or published, and no one
    else can reach it. (The console's web proxy serves only declared HTTP ports, to a signed-in browser.)
    With --json, one line {"local", "url", …} is printed once the port listens.
    """
    local_text, _, remote_text = ports.rpartition(":")
    if not remote_text.isdigit() or (local_text and not local_text.isdigit()):
        _fail(EXIT_USAGE, t("PORTS is REMOTE or LOCAL:REMOTE, numbers."), "usage", ctx.as_json)
    remote = int(remote_text)
    local = int(local_text) if local_text and int(local_text) else _free_port(address)
    instance = _resolve(ctx, ref)
    gateway = _gateway(instance)
    if gateway is None:
        _fail(
            EXIT_FAILED,
            t("{name} cannot be reached through the console's SSH gateway now (is it running?).", name=ref),
            "no_gateway",
            ctx.as_json,
        )
    host, port, login = gateway
    argv = ["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-p", str(port)]
    if identity_file:
        argv += ["-i", str(Path(identity_file).expanduser()), "-o", "IdentitiesOnly=yes"]
    for option in ssh_options:
        argv += ["-o", option]
    argv += ["-L", f"{address}:{local}:127.0.0.1:{remote}", f"{login}@{host}"]
    # Stopped by a signal, gpuctl stops its ssh too (the finally below), instead of leaving it forwarding.
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, lambda *_: sys.exit(0))
    tunnel = subprocess.Popen(argv)  # noqa: S603 - the user's own ssh, with arguments as a list
    try:
        if not _wait_listening(tunnel, address, local):
            _fail(
                EXIT_FAILED,
                t("ssh could not open the forward (exit {code}).", code=tunnel.returncode),
                "ssh_failed",
                ctx.as_json,
            )
        ready = {
            "instance": instance["id"],
            "local": f"{address}:{local}",
            "remote_port": remote,
            "url": f"http://{address}:{local}/",
        }
        if ctx.as_json:
            click.echo(json.dumps(ready), nl=True)
            sys.stdout.flush()
        else:
            err.print(
                t("Forwarding {url} → {name}:{port}. Ctrl-C stops.", url=ready["url"], name=ref, port=remote),
                highlight=False,
            )
        code = tunnel.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        if tunnel.poll() is None:
            tunnel.terminate()
            tunnel.wait()
    if code:
        _fail(EXIT_FAILED, t("ssh ended with exit {code}.", code=code), "ssh_failed", ctx.as_json)


def _wait_listening(tunnel: subprocess.Popen, address: str, port: int, timeout: float = 30.0) -> bool:
    """Whether ssh's forward accepts connections (False as soon as ssh has exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and tunnel.poll() is None:
        try:
            with socket.create_connection((address, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False
