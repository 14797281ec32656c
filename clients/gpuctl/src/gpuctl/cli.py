"""``gpuctl``: launch, list, reach and stop GPU instances, copy files, forward ports, deploy apps and
read the balance. The distribution is ``gpu-console-cli`` on the package index; the command is ``gpuctl``.

Tables by default, JSON with ``--json`` (one JSON document on stdout, nothing else there; ``logs -f``
prints one JSON object a line), so scripts can rely on both the output and the exit code.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import signal
import socket
import subprocess
import sys
import time
import webbrowser
from pathlib import Path

import click
from click.shell_completion import get_completion_class
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table

from gpuctl import __version__, config, transfer
from gpuctl.api import Client
from gpuctl.client import ApiError, device_login_poll, device_login_start
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


# --- commands -------------------------------------------------------------------------------------------------


@cli.command()
@click.option("--url", required=True, help="The console, e.g. https://console.example.com")
@click.option(
    "--token", default=None, help="An API token (Account → API tokens); without one, log in through the browser."
)
@click.option("--browser/--no-browser", default=True, help="Open the confirmation page in a browser.")
@click.option(
    "--read-only",
    is_flag=True,
    default=False,
    help="Through the browser: ask for a read-only token (it lists and reads; it cannot launch, stop or spend).",
)
@click.option("--team", default=None, help="The team a team-scoped token acts for (a label kept in the profile).")
@pass_ctx
def login(ctx: Context, url: str, token: str | None, browser: bool, read_only: bool, team: str | None) -> None:
    """Log in (through the browser, or with a token) and keep the token in the profile (`--profile`,
    `default` unless another is the default) of ~/.config/gpu-console-cli/config.toml."""
    if token is None:
        token = _device_login(ctx, url, browser, scope="read" if read_only else "full")
    with Client(url, token) as client:
        profile = client.account_profile_get()
    name = config.profile_name(ctx.profile_name, config.load())
    path = config.profile_save(name, url=url, token=token, team=team)
    ctx.emit(
        {"url": url, "email": profile["email"], "profile": name, "config": str(path)},
        lambda: out.print(t("Logged in to {url} as {email}.", url=url, email=profile["email"]), highlight=False),
    )


@cli.group(cls=Group)
def profile() -> None:
    """Saved consoles and teams: list them, choose the default, forget one."""


@profile.command(name="list")
@pass_ctx
def profile_list(ctx: Context) -> None:
    """The saved profiles (tokens not shown); * marks the one in use."""
    saved = config.load()
    current = config.profile_name(ctx.profile_name, saved)
    rows = [
        {"name": name, "url": values.get("url"), "team": values.get("team"), "current": name == current}
        for name, values in sorted(saved.get("profiles", {}).items())
    ]

    def render() -> None:
        table = Table(box=None, header_style="bold")
        for column in ("", t("Name"), "URL", t("Team")):
            table.add_column(column)
        for row in rows:
            table.add_row("*" if row["current"] else "", row["name"], row["url"] or "", row["team"] or "")
        out.print(table)

    ctx.emit(rows, render)


@profile.command(name="use")
@click.argument("name")
@pass_ctx
def profile_use(ctx: Context, name: str) -> None:
    """Make NAME the default profile."""
    try:
        config.profile_use(name)
    except config.ConfigError:
        _fail(EXIT_NOT_FOUND, t("No profile {name!r}.", name=name), "not_found", ctx.as_json)
    ctx.emit({"default_profile": name}, lambda: out.print(t("Using {name}.", name=name), highlight=False))


@profile.command(name="rm")
@click.argument("name")
@pass_ctx
def profile_rm(ctx: Context, name: str) -> None:
    """Forget profile NAME (the token stays valid: revoke it in the console)."""
    try:
        config.profile_remove(name)
    except config.ConfigError:
        _fail(EXIT_NOT_FOUND, t("No profile {name!r}.", name=name), "not_found", ctx.as_json)
    ctx.emit({"removed": name}, lambda: out.print(t("Forgot {name}.", name=name), highlight=False))


@cli.command()
@click.option("--gpu", "gpu_model", required=True, help="GPU model slug (see `gpuctl catalogue`).")
@click.option("--count", "gpu_count", default=1, show_default=True, type=int, help="Cards per node.")
@click.option("--region", required=True)
@click.option("--image", required=True, help="Image slug, e.g. pytorch-2.5-cu124.")
@click.option("--name", default=None)
@click.option("--disk", "disk_gb", type=int, default=None, help="System disk in GB.")
@click.option("--nodes", "node_count", type=int, default=None)
@click.option("--ssh-key", "ssh_keys", type=int, multiple=True, help="Id of one of your SSH keys (repeatable).")
@click.option("--idempotency-key", default=None, help="Reuse to retry safely; a random one by default.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until it runs.")
@click.option("--timeout", default=600, show_default=True, help="Seconds to wait.")
@pass_ctx
def launch(ctx: Context, wait: bool, timeout: int, idempotency_key: str | None, ssh_keys, **spec) -> None:
    """Launch an instance, wait until it runs, and print how to reach it."""
    body = {k: v for k, v in {**spec, "ssh_keys": list(ssh_keys) or None}.items() if v is not None}
    instance = ctx.client.instances_create(body, idempotency_key=idempotency_key)
    if wait:
        instance = _wait_running(ctx, instance, timeout)
    ctx.emit(instance, lambda: _show(instance, ctx.client.url))


def _device_login(ctx: Context, url: str, browser: bool, scope: str = "full") -> str:
    started = device_login_start(url, f"gpuctl on {platform.node() or 'a terminal'}", scope=scope)
    err.print(
        t("Open {uri} and check the code {code}.", uri=started["verification_uri_complete"], code=started["user_code"]),
        highlight=False,
    )
    if browser:
        webbrowser.open(started["verification_uri_complete"])
    interval = float(os.environ.get("GPUCTL_POLL_S", started["interval"]))
    deadline = time.monotonic() + started["expires_in"]
    while time.monotonic() < deadline:
        time.sleep(interval)
        try:
            return device_login_poll(url, started["device_code"])
        except ApiError as error:
            if error.code != "authorization_pending":
                raise
    _fail(EXIT_AUTH, t("The code expired; start again."), "expired_token", ctx.as_json)
    raise AssertionError  # _fail exits


def _wait_running(ctx: Context, instance: dict, timeout: int) -> dict:
    deadline = time.monotonic() + timeout
    name = instance["name"] or instance["id"][:8]
    status_line = err.status(t("Launched {name} ({id}); waiting for it to run…", name=name, id=instance["id"][:8]))
    if not ctx.as_json:
        status_line.start()
    try:
        while instance["status"] != "running":
            if instance["status"] in FAILED_STATUSES:
                _fail(
                    EXIT_FAILED,
                    t(
                        "{name} is {status}: {reason}",
                        name=name,
                        status=instance["status"],
                        reason=instance.get("status_reason") or "-",
                    ),
                    "instance_" + instance["status"],
                    ctx.as_json,
                )
            if time.monotonic() > deadline:
                _fail(
                    EXIT_FAILED,
                    t(
                        "Gave up waiting after {seconds} s; it is {status}. `gpuctl show {id}` follows it.",
                        seconds=timeout,
                        status=instance["status"],
                        id=instance["id"][:8],
                    ),
                    "timeout",
                    ctx.as_json,
                )
            if not ctx.as_json:
                status_line.update(f"{name}: {instance['status_display']}…")
            time.sleep(float(os.environ.get("GPUCTL_POLL_S", "2")))
            instance = ctx.client.instances_get(instance["id"])
    finally:
        status_line.stop()
    if not ctx.as_json:
        err.print(t("{name} is running.", name=name), highlight=False)
    return instance


@cli.command(name="ls")
@click.option("--all", "released", is_flag=True, help="Include released instances.")
@click.option("--status", multiple=True, help="Only these statuses (repeatable).")
@pass_ctx
def ls_(ctx: Context, released: bool, status) -> None:
    """List your instances."""
    rows = list(ctx.client.instances_list(status=list(status) or None, released=released or None))
    ctx.emit(
        rows,
        lambda: (
            out.print(_instance_table(rows)) if rows else out.print(t("No instances. Launch one with `gpuctl launch`."))
        ),
    )


@cli.command()
@click.argument("ref")
@pass_ctx
def show(ctx: Context, ref: str) -> None:
    """One instance (by id, id prefix or name) and its entries."""
    instance = _resolve(ctx, ref)
    ctx.emit(instance, lambda: _show(instance, ctx.client.url))


def _action(verb: str, doc: str):
    @click.argument("ref")
    @pass_ctx
    def command(ctx: Context, ref: str) -> None:
        instance = getattr(ctx.client, f"instances_{verb}")(_resolve(ctx, ref)["id"])
        ctx.emit(
            instance,
            lambda: out.print(
                f"{instance['name'] or instance['id'][:8]}: {instance['status_display']}", highlight=False
            ),
        )

    command.__doc__ = doc
    return command


cli.command(name="start")(_action("start", "Start a stopped instance."))
cli.command(name="stop")(_action("stop", "Stop an instance (GPUs freed, disk kept)."))
cli.command(name="restart")(_action("restart", "Restart an instance in place."))
cli.command(name="rm")(_action("release", "Release an instance: destroy it with its disk."))


@cli.command()
@click.argument("ref")
@click.option("--nodes", "node_count", required=True, type=click.IntRange(min=1), help="Nodes it should have.")
@pass_ctx
def resize(ctx: Context, ref: str, node_count: int) -> None:
    """Grow or shrink a running cluster by whole nodes (billed from the second it changes)."""
    instance = ctx.client.instances_resize(_resolve(ctx, ref)["id"], {"node_count": node_count})
    ctx.emit(
        instance,
        lambda: out.print(
            t(
                "{name}: {nodes} nodes, {total} GPUs in all",
                name=instance["name"] or instance["id"][:8],
                nodes=instance["node_count"],
                total=instance["node_count"] * instance["gpu_count"],
            ),
            highlight=False,
        ),
    )


@cli.command()
@click.argument("ref")
@click.option("--print", "print_only", is_flag=True, help="Print the ssh command instead of running it.")
@pass_ctx
def ssh(ctx: Context, ref: str, print_only: bool) -> None:
    """Open a shell on an instance (through the console's SSH entry)."""
    instance = _resolve(ctx, ref)
    entries = instance.get("entry_points") or {}
    # Direct SSH where the provider serves it, else the console's SSH gateway (every backend).
    command = entries.get("ssh_command") or entries.get("gateway_command")
    if not command:
        _fail(
            EXIT_FAILED,
            t("{name} offers no SSH entry.", name=instance["name"] or instance["id"][:8]),
            "no_ssh",
            ctx.as_json,
        )
    if print_only or ctx.as_json:
        ctx.emit({"ssh_command": command}, lambda: click.echo(command))
        return
    argv = shlex.split(command)
    os.execvp(argv[0], argv)  # noqa: S606 - the user's own ssh, with the console's command line


@cli.command()
@click.argument("ref")
@pass_ctx
def events(ctx: Context, ref: str) -> None:
    """An instance's status history."""
    rows = list(ctx.client.instances_events_list(_resolve(ctx, ref)["id"]))

    def render() -> None:
        table = Table(box=None, header_style="bold")
        for column in (t("Time"), t("Change"), t("Kind"), t("Reason")):
            table.add_column(column)
        for row in rows:
            table.add_row(
                row["created_at"][:19].replace("T", " "),
                f"{row['old'] or '·'} → {row['new']}",
                row["kind"],
                row.get("reason") or "",
            )
        out.print(table)

    ctx.emit(rows, render)


@cli.command()
@click.argument("app")
@click.option("--gpu", "gpu_model", required=True)
@click.option("--count", "gpu_count", default=1, show_default=True, type=int)
@click.option("--region", required=True)
@click.option("--model", default=None, help="Repository id of the model to serve (the app's default otherwise).")
@click.option("--idempotency-key", default=None)
@pass_ctx
def deploy(ctx: Context, app: str, idempotency_key: str | None, **spec) -> None:
    """Deploy a one-click app; prints its base URL and API key (shown once)."""
    body = {"app": app, **{k: v for k, v in spec.items() if v is not None}}
    deployment = ctx.client.deployments_create(body, idempotency_key=idempotency_key)

    def render() -> None:
        out.print(t("Deployed {app} ({id}).", app=deployment["app"], id=deployment["id"]), highlight=False)
        if deployment.get("api_base_url"):
            out.print(t("Base URL: {url}", url=deployment["api_base_url"]), highlight=False)
        if deployment.get("api_key"):
            out.print(t("API key (shown once): {key}", key=deployment["api_key"]), highlight=False)
        else:  # an Idempotency-Key replay: the key was in the first answer only
            out.print(t("The API key was shown in the first answer only."), highlight=False)

    ctx.emit(deployment, render)


@cli.command()
@pass_ctx
def volumes(ctx: Context) -> None:
    """List your volumes."""
    rows = list(ctx.client.volumes_list())

    def render() -> None:
        table = Table(box=None, header_style="bold")
        for column in ("ID", t("Name"), t("Status"), t("Region"), "GB"):
            table.add_column(column)
        for row in rows:
            table.add_row(row["id"][:8], row["name"], row["status"], row["region"], str(row["size_gb"]))
        out.print(table)

    ctx.emit(rows, render)


@cli.command()
@pass_ctx
def balance(ctx: Context) -> None:
    """Your balance and how long it lasts at the current rate."""
    body = ctx.client.billing_balance_get()

    def render() -> None:
        runway = body["runway_seconds"]
        hours = "" if runway is None else f"  (~{runway // 3600} h at {_yuan(body['burn_fen_per_hour'])}/h)"
        out.print(f"{t('Balance')}: {_yuan(body['total_fen'])}{hours}", highlight=False)

    ctx.emit(body, render)


@cli.command()
@click.argument("month", required=False)
@pass_ctx
def usage(ctx: Context, month: str | None) -> None:
    """What you used in a month (YYYY-MM; this month by default), line by line."""
    month = month or time.strftime("%Y-%m")
    body = ctx.client.billing_statements_get(month)

    def render() -> None:
        table = Table(box=None, header_style="bold")
        for column in (t("Resource"), t("Description"), t("Hours"), t("Amount")):
            table.add_column(column)
        for line in body["lines"]:
            table.add_row(
                line["resource"], line["description"], f"{line['seconds'] / 3600:.2f}", _yuan(line["amount_fen"])
            )
        out.print(table)
        out.print(f"{t('Total')}: {_yuan(body['lines_total_fen'])}", highlight=False)

    ctx.emit(body, render)


@cli.group(cls=Group, invoke_without_command=True)
@click.pass_context
def quota(click_ctx) -> None:
    """Your GPU quota per model; `gpuctl quota request` asks for more."""
    if click_ctx.invoked_subcommand is None:
        ctx = click_ctx.find_object(Context)
        rows = ctx.client.quota_list()

        def render() -> None:
            table = Table(box=None, header_style="bold")
            for column in ("GPU", t("Used"), t("Limit")):
                table.add_column(column)
            for row in rows:
                table.add_row(row["gpu_model"], str(row["used"]), str(row["limit"]))
            out.print(table)

        ctx.emit(rows, render)


@quota.command(name="request")
@click.option("--gpu", "gpu_model", required=True)
@click.option("--cards", type=int, required=True)
@click.option("--days", "duration_days", type=int, default=30, show_default=True)
@click.option("--reason", required=True)
@pass_ctx
def quota_request(ctx: Context, **body) -> None:
    """Ask staff for more cards of a GPU model."""
    created = ctx.client.quota_requests_create(body)
    ctx.emit(created, lambda: out.print(f"#{created['id']}: {created['status']}", highlight=False))


@cli.command()
@click.argument("ref")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events until the instance is released.")
@click.option(
    "--interval", default=2.0, show_default=True, type=click.FloatRange(min=0.01), help="Seconds between polls."
)
@pass_ctx
def logs(ctx: Context, ref: str, follow: bool, interval: float) -> None:
    """An instance's events (status changes, node changes), oldest first; -f follows them.

    With --json: a list, or with -f one JSON object a line as they happen.
    """
    instance_id = _resolve(ctx, ref)["id"]
    if not follow:
        rows = list(ctx.client.instances_events_list(instance_id))
        ctx.emit(rows, lambda: [_print_event(row) for row in rows])
        return
    seen = 0
    while True:
        rows = list(ctx.client.instances_events_list(instance_id))
        new, seen = rows[seen:], len(rows)
        for row in new:
            if ctx.as_json:
                click.echo(json.dumps(row, ensure_ascii=False))
            else:
                _print_event(row)
        if ctx.client.instances_get(instance_id)["status"] in ENDED and seen == len(
            list(ctx.client.instances_events_list(instance_id))
        ):
            return
        time.sleep(float(os.environ.get("GPUCTL_POLL_S", interval)))


ENDED = {"released", "failed", "lost"}


def _print_event(row: dict) -> None:
    reason = f"  {row['reason']}" if row.get("reason") else ""
    out.print(
        f"{(row.get('created_at') or '')[:19].replace('T', ' ')}  {row.get('old') or '·'} → {row['new']}{reason}",
        highlight=False,
    )


# --- files --------------------------------------------------------------------------------------------------


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


# --- SSH through the console's gateway -----------------------------------------------------------------------


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


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@pass_ctx
def completion(ctx: Context, shell: str) -> None:
    """Print the shell completion script: `eval "$(gpuctl completion bash)"` in ~/.bashrc (zsh: ~/.zshrc),
    `gpuctl completion fish > ~/.config/fish/completions/gpuctl.fish`."""
    script = get_completion_class(shell)(cli, {}, "gpuctl", "_GPUCTL_COMPLETE").source()
    ctx.emit({"shell": shell, "script": script}, lambda: click.echo(script))


def main() -> None:
    cli(prog_name="gpuctl")


if __name__ == "__main__":
    main()
