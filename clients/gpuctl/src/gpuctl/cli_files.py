"""``gpuctl cp``: files between this computer and an instance's disk or a volume, through the console's
files API (``gpuctl.transfer``), resumable, with a progress bar.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from gpuctl import transfer
from gpuctl.cli_base import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    Context,
    _fail,
    _resolve,
    cli,
    err,
    out,
    pass_ctx,
)
from gpuctl.messages import t


def _is_remote(spec: str) -> bool:
    if spec.startswith(("/", "./", "../", "~")) or spec in (".", ".."):
        return False
    return ":" in spec


def _resolve_volume(ctx: Context, ref: str) -> dict:
    rows = list(ctx.client.volumes_list())
    matches = [r for r in rows if r["id"] == ref] or [r for r in rows if r["id"].startswith(ref)]
    matches = matches or [r for r in rows if r["name"] == ref]
    if len(matches) != 1:
        _fail(
            EXIT_NOT_FOUND,
            t("No volume matches {ref!r}.", ref=ref) if not matches else t("{ref!r} matches several volumes.", ref=ref),
            "not_found" if not matches else "ambiguous",
            ctx.as_json,
        )
    return matches[0]


def _remote(ctx: Context, spec: str) -> transfer.Remote:
    ref, _, path = spec.partition(":")
    if ref.startswith("volume/"):
        volume = _resolve_volume(ctx, ref.removeprefix("volume/"))
        return transfer.Remote(ctx.client, "volume", volume["id"], path or "/")
    return transfer.Remote(ctx.client, "instance", _resolve(ctx, ref)["id"], path or ".")


@cli.command()
@click.argument("source")
@click.argument("destination")
@click.option("-r", "--recursive", is_flag=True, help="Copy folders and what they hold.")
@click.option("--force", is_flag=True, help="Copy again files that look complete (same size) at the destination.")
@pass_ctx
def cp(ctx: Context, source: str, destination: str, recursive: bool, force: bool) -> None:
    """Copy files to or from an instance's disk or a volume, through the console's files API.

    \b
      gpuctl cp ./data.bin train:/root/          to the instance "train" (name, id or id prefix)
      gpuctl cp -r train:/root/runs ./runs       from it, a whole folder
      gpuctl cp ckpt.pt volume/datasets:/ckpt/   to a volume (name, id or id prefix)

    Resumable: an upload that stopped continues where the console says it got to (the file's remote
    size); files already complete are skipped. Downloads skip files whose local copy has the remote
    size and fetch any other whole (the API serves no byte ranges), through NAME.part. Large files
    (over 512 MB from an instance) go faster with rsync or scp through `gpuctl ssh-config`.
    """
    if _is_remote(source) == _is_remote(destination):
        _fail(
            EXIT_USAGE,
            t("Give one local path and one remote (INSTANCE:PATH or volume/VOLUME:PATH)."),
            "usage",
            ctx.as_json,
        )
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err,
        disable=ctx.as_json,
        transient=False,
    )
    tasks: dict[str, int] = {}

    def progress(name: str, done: int, total: int) -> None:
        if name not in tasks:
            tasks[name] = bar.add_task(name, total=total)
        bar.update(tasks[name], completed=done)

    with bar:
        if _is_remote(destination):
            local = Path(source).expanduser()
            if not local.exists():
                _fail(EXIT_NOT_FOUND, t("{path}: no such file.", path=source), "not_found", ctx.as_json)
            rows = transfer.upload(
                local, _remote(ctx, destination), recursive=recursive, force=force, progress=progress
            )
        else:
            rows = transfer.download(
                _remote(ctx, source),
                Path(destination).expanduser(),
                recursive=recursive,
                force=force,
                progress=progress,
            )
    summary = transfer.as_json(rows)

    def render() -> None:
        copied = sum(1 for row in rows if row.outcome != "skipped")
        skipped = len(rows) - copied
        moved = sum(row.transferred for row in rows)
        out.print(
            t(
                "{copied} copied ({bytes} bytes), {skipped} already complete.",
                copied=copied,
                bytes=moved,
                skipped=skipped,
            ),
            highlight=False,
        )

    ctx.emit(summary, render)
