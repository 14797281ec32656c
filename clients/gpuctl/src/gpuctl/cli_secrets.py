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


@cli.group(cls=Group)
def registries() -> None:
    """Logins to private container registries, to import your own images (`gpuctl images import`)."""


@registries.command(name="list")
@pass_ctx
def registries_list(ctx: Context) -> None:
    """Your registry logins: hosts and user names (never passwords)."""
    rows = list(ctx.client.registry_credentials_list())

    def render() -> None:
        if not rows:
            out.print(t("No registry logins. Save one with `gpuctl registries login HOST --username NAME`."))
            return
        table = Table(box=None, header_style="bold")
        for column in (t("Registry"), t("User name"), t("Updated")):
            table.add_column(column)
        for row in rows:
            table.add_row(row["host"], row["username"], row["updated_at"][:19].replace("T", " "))
        out.print(table)

    ctx.emit(rows, render)


def _credential_for(ctx: Context, host: str) -> dict | None:
    host = host.strip().lower()
    return next((row for row in ctx.client.registry_credentials_list() if row["host"] == host), None)


@registries.command(name="login")
@click.argument("host")
@click.option("--username", required=True, help="The registry's user name.")
@click.option(
    "--from-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Read the password or token from this file; otherwise from standard input.",
)
@pass_ctx
def registries_login(ctx: Context, host: str, username: str, from_file: str | None) -> None:
    """Save the login to registry HOST (host:port), or replace it; the password is read from standard
    input or a file, never the command line."""
    password = _read_value(from_file)
    existing = _credential_for(ctx, host)
    if existing is None:
        saved = ctx.client.registry_credentials_create({"host": host, "username": username, "password": password})
    else:
        saved = ctx.client.registry_credentials_update(existing["id"], {"username": username, "password": password})
    ctx.emit(saved, lambda: out.print(t("Saved the login for {host}.", host=saved["host"]), highlight=False))


@registries.command(name="delete")
@click.argument("host")
@pass_ctx
def registries_delete(ctx: Context, host: str) -> None:
    """Delete the login to registry HOST."""
    existing = _credential_for(ctx, host)
    if existing is None:
        raise click.UsageError(t("No login saved for {host}.", host=host))
    ctx.client.registry_credentials_delete(existing["id"])
    ctx.emit({"deleted": existing["host"]}, lambda: out.print(t("Deleted the login for {host}.", host=host)))
