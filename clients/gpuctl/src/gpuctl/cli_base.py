"""What every gpuctl command shares: the root group (``cli``) with its options, the context it passes
(the profile's client, JSON or tables), the exit codes, and the table and error printers. The commands
register on ``cli`` from ``gpuctl.cli`` (instances, apps, billing), ``gpuctl.cli_files`` (``cp``) and
``gpuctl.cli_ssh`` (``ssh-config``, ``port-forward``).
"""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.table import Table

from gpuctl import __version__, config
from gpuctl.api import Client
from gpuctl.client import ApiError
from gpuctl.messages import t

EXIT_REFUSED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_AUTH, EXIT_FAILED, EXIT_UNAVAILABLE = 1, 2, 3, 4, 5, 6, 7


FAILED_STATUSES = {"failed", "lost", "released", "stopped"}


EXIT_CODES = """\b
Exit codes:
  0  done
  1  refused by the console (400 and other 4xx: `fields` says why)
  2  usage: a wrong option or argument
  3  no such object (404, or no instance matches the name)
  4  conflict: a business rule refused it (409/413: `code` says which)
  5  not logged in, the token is not valid, or it may not do this (401/403)
  6  the instance failed or waiting timed out; ssh/rsync through the gateway failed
  7  the console could not be reached, or is unavailable (503, 429) after retries
"""


out = Console()


err = Console(stderr=True)


class Context:
    def __init__(self, as_json: bool, profile: str | None) -> None:
        self.as_json = as_json
        self.profile_name = profile
        self._client: Client | None = None

    @property
    def profile(self) -> config.Profile:
        try:
            return config.resolve(self.profile_name)
        except config.ConfigError as exc:
            _fail(EXIT_USAGE, str(exc), "bad_config", self.as_json)
            raise AssertionError from exc  # _fail exits

    @property
    def client(self) -> Client:
        if self._client is None:
            profile = self.profile
            if not profile.url or not profile.token:
                _fail(
                    EXIT_AUTH,
                    t("Not logged in: run `gpuctl login --url URL --token TOKEN` (or set GPUCTL_URL and GPUCTL_TOKEN).")
                    + (f" [profile {profile.name}]" if profile.name != "default" else ""),
                    "not_logged_in",
                    self.as_json,
                )
            self._client = Client(profile.url, profile.token)
        return self._client

    def emit(self, data, render) -> None:
        """JSON on stdout with --json; otherwise what ``render`` prints for people."""
        if self.as_json:
            click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            render()


def _fail(code: int, message: str, error_code: str, as_json: bool, fields: dict | None = None):
    if as_json:
        body = {"error": {"code": error_code, "message": message, **({"fields": fields} if fields else {})}}
        click.echo(json.dumps(body, ensure_ascii=False))
    else:
        err.print(f"[red]{t('Error')}:[/red] {message}", highlight=False)
        for field, problems in (fields or {}).items():
            err.print(f"  {field}: {problems}", highlight=False)
    sys.exit(code)


def _exit_code(error: ApiError) -> int:
    if error.status in (0, 429) or error.status >= 500:
        return EXIT_UNAVAILABLE
    if error.status in (401, 403):
        return EXIT_AUTH
    if error.status == 404:
        return EXIT_NOT_FOUND
    if error.status in (409, 413):
        return EXIT_CONFLICT
    return EXIT_REFUSED


class Group(click.Group):
    """Turns the console's refusals into a message and an exit code, once for every command."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ApiError as error:
            as_json = bool(ctx.obj and ctx.obj.as_json)
            _fail(_exit_code(error), error.message, error.code, as_json, error.fields)
        except OSError as error:  # a local file: unreadable, a folder without -r
            as_json = bool(ctx.obj and ctx.obj.as_json)
            _fail(EXIT_REFUSED, str(error), "local_error", as_json)


@click.group(cls=Group, epilog=EXIT_CODES)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of tables.")
@click.option(
    "--profile",
    default=None,
    envvar="GPUCTL_PROFILE",
    help="Which saved console and token to use (see `gpuctl profile list`); env GPUCTL_PROFILE.",
)
@click.version_option(version=__version__, prog_name="gpuctl")
@click.pass_context
def cli(ctx, as_json: bool, profile: str | None) -> None:
    """The GPU console from the terminal.

    Shell completion: `eval "$(gpuctl completion bash)"` (or zsh; fish: `gpuctl completion fish | source`).
    """
    ctx.obj = Context(as_json, profile)


pass_ctx = click.make_pass_decorator(Context)


def _resolve(ctx: Context, ref: str) -> dict:
    """An instance by its full id, a unique id prefix, or its exact name."""
    if len(ref) == 36:
        return ctx.client.instances_get(ref)
    rows = list(ctx.client.instances_list(released=True))
    matches = [row for row in rows if row["id"].startswith(ref)] or [row for row in rows if row["name"] == ref]
    if not matches:
        _fail(EXIT_NOT_FOUND, t("No instance matches {ref!r}.", ref=ref), "not_found", ctx.as_json)
    if len(matches) > 1:
        ids = ", ".join(row["id"][:8] for row in matches)
        _fail(
            EXIT_NOT_FOUND,
            t("{ref!r} matches several instances: {ids}. Give more of the id.", ref=ref, ids=ids),
            "ambiguous",
            ctx.as_json,
        )
    return ctx.client.instances_get(matches[0]["id"])


def _yuan(fen: int | None) -> str:
    return "-" if fen is None else f"¥{fen / 100:,.2f}"


def _instance_table(rows: list[dict]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("ID", t("Name"), t("Status"), t("Region"), t("GPUs"), t("Price/h"), t("Created")):
        table.add_column(column)
    for row in rows:
        gpus = f"{row['gpu_count']}× {row['gpu_model']}" + (
            f" ×{row['node_count']}" if row.get("node_count", 1) > 1 else ""
        )
        table.add_row(
            row["id"][:8],
            row["name"],
            row["status"],
            row["region"],
            gpus,
            _yuan(row["hourly_price_fen"]),
            row["created_at"][:16].replace("T", " "),
        )
    return table


def _print_entries(instance: dict, base: str) -> None:
    entries = instance.get("entry_points") or {}
    for label, key in (("SSH", "ssh_command"), ("JupyterLab", "jupyterlab_url"), ("VS Code", "vscode_url")):
        value = entries.get(key)
        if value:
            out.print(
                f"  {label + ':':12} {base.rstrip('/') + value if value.startswith('/') else value}", highlight=False
            )


def _show(instance: dict, base: str = "") -> None:
    out.print(f"[bold]{instance['name']}[/bold]  {instance['id']}", highlight=False)
    out.print(
        f"  {t('Status') + ':':12} {instance['status_display']}"
        + (f" — {instance['status_reason']}" if instance.get("status_reason") else ""),
        highlight=False,
    )
    out.print(
        f"  {t('Region') + ':':12} {instance['region']}   {instance['gpu_count']}× {instance['gpu_model']}   {instance['image']}",
        highlight=False,
    )
    out.print(f"  {t('Price/h') + ':':12} {_yuan(instance['hourly_price_fen'])}", highlight=False)
    _print_entries(instance, base)
