"""``gpuctl secrets``: the acting account's secrets (a token scoped to a team: the team's). A value is
read from standard input or a file, never from the command line, where the shell's history and the
process list would keep it; the console never sends a value back, so ``list`` shows names and dates."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from gpuctl.cli_base import Context, Group, cli, out, pass_ctx
from gpuctl.client import Conflict
from gpuctl.messages import t


@cli.group(cls=Group)
def secrets() -> None:
    """Secrets (W&B, model hub tokens…) that chosen instances get in /run/console-secrets/."""


@secrets.command(name="list")
@pass_ctx
def secrets_list(ctx: Context) -> None:
    """Your secrets: names, sizes and when they changed (never values)."""
    rows = list(ctx.client.secrets_list())

    def render() -> None:
        if not rows:
            out.print(t("No secrets. Save one with `gpuctl secrets set NAME`."), highlight=False)
            return
        table = Table(box=None, header_style="bold")
        for column in (t("Name"), t("Bytes"), t("Updated")):
            table.add_column(column)
        for row in rows:
            table.add_row(row["name"], str(row["size"]), row["updated_at"][:19].replace("T", " "))
        out.print(table)

    ctx.emit(rows, render)


def _read_value(from_file: str | None) -> str:
    if from_file is not None:
        with open(from_file, encoding="utf-8") as handle:
            return handle.read()
    if sys.stdin.isatty():
        return click.prompt(t("Value"), hide_input=True, err=True)
    value = sys.stdin.read()
    return value[:-1] if value.endswith("\n") else value  # `echo` adds one


@secrets.command(name="set")
@click.argument("name")
@click.option(
    "--from-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Read the value from this file (whole); otherwise from standard input.",
)
@pass_ctx
def secrets_set(ctx: Context, name: str, from_file: str | None) -> None:
    """Save NAME: a new secret, or a new value for it (instances get it at their next start)."""
    value = _read_value(from_file)
    try:
        secret = ctx.client.secrets_create({"name": name, "value": value})
        message = t("Saved {name}.", name=name)
    except Conflict as error:
        if error.code != "secret_exists":
            raise
        secret = ctx.client.secrets_update(name, {"value": value})
        message = t("Replaced the value of {name}; instances get it at their next start or restart.", name=name)
    ctx.emit(secret, lambda: out.print(message, highlight=False))


@secrets.command(name="delete")
@click.argument("name")
@pass_ctx
def secrets_delete(ctx: Context, name: str) -> None:
    """Delete NAME; instances that had it boot without it from their next start."""
    ctx.client.secrets_delete(name)
    ctx.emit({"deleted": name}, lambda: out.print(t("Deleted {name}.", name=name), highlight=False))
