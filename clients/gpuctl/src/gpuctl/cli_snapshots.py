"""``gpuctl snapshots``: snapshots of an instance's disk (list, create, restore, delete, schedule), and
``gpuctl clone``: a new instance with an instance's image and a copy of its disk. Creating, restoring
and cloning wait (``--no-wait`` returns at once) and show the copy's progress."""

from __future__ import annotations

import os
import time

import click
from rich.table import Table

from gpuctl.cli_base import EXIT_FAILED, Context, Group, _fail, _resolve, _show, _yuan, cli, out, pass_ctx
from gpuctl.messages import t

BUSY = ("creating", "restoring", "deleting")


def _line(snapshot: dict) -> str:
    size = f"{snapshot['size_bytes'] / 2**30:.2f} GB" if snapshot.get("size_bytes") else "—"
    return f"{snapshot['id']}  {snapshot['name']}  {snapshot['status']}  {size}"


def _wait(ctx: Context, snapshot: dict, *, restored_before: str | None = None) -> dict:
    """Follow ``snapshot`` until it is no longer creating or restoring, printing its progress. A snapshot
    that failed, or a restore that did not happen (``restored_at`` still ``restored_before``), fails."""
    restoring = snapshot["status"] == "restoring"
    shown = -1
    while snapshot["status"] in ("creating", "restoring"):
        if not ctx.as_json and snapshot["progress"] != shown:
            shown = snapshot["progress"]
            out.print(t("{status}: {percent} %", status=snapshot["status"], percent=shown), highlight=False)
        time.sleep(float(os.environ.get("GPUCTL_POLL_S", 2)))
        snapshot = ctx.client.snapshots_get(snapshot["id"])
    if snapshot["status"] == "failed" or (restoring and snapshot.get("restored_at") == restored_before):
        _fail(EXIT_FAILED, snapshot.get("status_reason") or snapshot["status"], "snapshot_failed", ctx.as_json)
    return snapshot


@cli.group(cls=Group, invoke_without_command=True)
@click.pass_context
def snapshots(click_ctx) -> None:
    """Snapshots of an instance's disk (/home/user): list, create, restore, delete, schedule. Billed per
    GB-day while they exist; deleted with the instance when it is released."""
    if click_ctx.invoked_subcommand is None:
        click.echo(click_ctx.get_help())


@snapshots.command(name="list")
@click.argument("ref")
@pass_ctx
def snapshots_list(ctx: Context, ref: str) -> None:
    """The snapshots of instance REF, newest first, with their state, progress and size."""
    instance = _resolve(ctx, ref)
    rows = ctx.client.instances_snapshots_list(instance["id"])

    def render() -> None:
        if not rows:
            out.print(t("No snapshots. Take one with `gpuctl snapshots create INSTANCE`."), highlight=False)
            return
        table = Table(box=None, header_style="bold")
        for column in ("ID", t("Name"), t("Status"), "GB", t("Created")):
            table.add_column(column)
        for row in rows:
            status = row["status"] + (f" {row['progress']} %" if row["status"] in BUSY else "")
            table.add_row(
                row["id"],
                row["name"],
                status + (f" ({row['status_reason']})" if row.get("status_reason") else ""),
                f"{row['size_bytes'] / 2**30:.2f}" if row["size_bytes"] else "—",
                (row.get("created_at") or "")[:16].replace("T", " "),
            )
        out.print(table)

    ctx.emit(rows, render)


@snapshots.command(name="create")
@click.argument("ref")
@click.option("--name", default="", help="What to call it (default: the date and time).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until it is ready (or failed).")
@pass_ctx
def snapshots_create(ctx: Context, ref: str, name: str, wait: bool) -> None:
    """Snapshot the disk of instance REF (running or stopped)."""
    instance = _resolve(ctx, ref)
    snapshot = ctx.client.instances_snapshots_create(instance["id"], {"name": name})
    if wait:
        snapshot = _wait(ctx, snapshot)
    ctx.emit(snapshot, lambda: out.print(_line(snapshot), highlight=False))


@snapshots.command(name="restore")
@click.argument("snapshot_id")
@click.option("--yes", is_flag=True, help="Do not ask: the disk goes back to the snapshot.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until the restore is done.")
@pass_ctx
def snapshots_restore(ctx: Context, snapshot_id: str, yes: bool, wait: bool) -> None:
    """Restore SNAPSHOT_ID into its instance, which must be stopped: what was written since is lost."""
    if not yes and not ctx.as_json:
        click.confirm(t("Restore {id}? What was written since it was taken is lost.", id=snapshot_id), abort=True)
    before = ctx.client.snapshots_get(snapshot_id).get("restored_at")
    snapshot = ctx.client.snapshots_restore(snapshot_id)
    if wait:
        snapshot = _wait(ctx, snapshot, restored_before=before)
    ctx.emit(snapshot, lambda: out.print(_line(snapshot), highlight=False))


@snapshots.command(name="delete")
@click.argument("snapshot_id")
@pass_ctx
def snapshots_delete(ctx: Context, snapshot_id: str) -> None:
    """Delete a snapshot; its bill stops."""
    ctx.client.snapshots_delete(snapshot_id)
    ctx.emit(
        {"id": snapshot_id, "deleted": True}, lambda: out.print(t("Deleted {id}.", id=snapshot_id), highlight=False)
    )


@snapshots.command(name="schedule")
@click.argument("ref")
@click.option("--every", "every_hours", type=click.IntRange(0, 168), required=True, help="Hours between (0: off).")
@click.option("--keep", type=click.IntRange(1), default=3, show_default=True, help="Scheduled snapshots kept.")
@pass_ctx
def snapshots_schedule(ctx: Context, ref: str, every_hours: int, keep: int) -> None:
    """Take a snapshot of instance REF every N hours, keeping the last K (--every 0 turns it off)."""
    instance = _resolve(ctx, ref)
    body = ctx.client.instances_snapshot_schedule_set(instance["id"], {"every_hours": every_hours, "keep": keep})

    def render() -> None:
        if body["every_hours"] is None:
            out.print(t("Scheduled snapshots are off."), highlight=False)
        else:
            out.print(
                t(
                    "Every {hours} h, keeping {keep}; next at {at}.",
                    hours=body["every_hours"],
                    keep=body["keep"],
                    at=(body["next_at"] or "")[:16].replace("T", " "),
                ),
                highlight=False,
            )

    ctx.emit(body, render)


@cli.command()
@click.argument("ref")
@click.option("--name", default="", help="The new instance's name (default: REF's name + -clone).")
@click.option("--snapshot", "snapshot_id", default="", help="Copy this ready snapshot (default: one taken now).")
@pass_ctx
def clone(ctx: Context, ref: str, name: str, snapshot_id: str) -> None:
    """A new instance like REF: the same region, GPUs and image, and a copy of its disk. Billed like a launch."""
    instance = _resolve(ctx, ref)
    created = ctx.client.instances_clone(instance["id"], {"name": name, "snapshot": snapshot_id})
    if not ctx.as_json:
        out.print(
            t(
                "Cloned {source} as {name} ({id}), {price}/h while it runs.",
                source=instance["name"],
                name=created["name"],
                id=created["id"],
                price=_yuan(created["hourly_price_fen"]),
            ),
            highlight=False,
        )
    ctx.emit(created, lambda: _show(created))
