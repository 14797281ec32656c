"""``gpuctl``: launch, list, reach and stop GPU instances, deploy apps and read the balance.

Tables by default, JSON with ``--json`` (one JSON document on stdout, nothing else there), so scripts
can rely on both the output and the exit code:

====  =================================================================
0     done
1     refused by the console (a 400: ``fields`` says why)
3     no such object
4     conflict: a business rule refused it (``code`` says which)
5     not logged in, or the token is not valid
6     the instance failed, or waiting for it timed out
7     the console could not be reached
====  =================================================================
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time
import webbrowser
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from gpuctl import __version__
from gpuctl.client import ApiError, Client, device_login_poll, device_login_start
from gpuctl.messages import t

EXIT_REFUSED, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_AUTH, EXIT_FAILED, EXIT_UNREACHABLE = 1, 3, 4, 5, 6, 7
FAILED_STATUSES = {"failed", "lost", "released", "stopped"}

out = Console()
err = Console(stderr=True)


def _config_path() -> Path:
    default = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "gpuctl" / "config.json"
    return Path(os.environ.get("GPUCTL_CONFIG", default))


def _load_config() -> dict:
    try:
        return json.loads(_config_path().read_text())
    except (OSError, ValueError):
        return {}


class Context:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            config = _load_config()
            url = os.environ.get("GPUCTL_URL") or config.get("url")
            token = os.environ.get("GPUCTL_TOKEN") or config.get("token")
            if not url or not token:
                _fail(
                    EXIT_AUTH,
                    t(
                        "Not logged in: run `gpuctl login --url URL --token TOKEN` (or set GPUCTL_URL and GPUCTL_TOKEN)."
                    ),
                    "not_logged_in",
                    self.as_json,
                )
            self._client = Client(url, token)
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
    if error.status == 0:
        return EXIT_UNREACHABLE
    if error.status in (401, 403):
        return EXIT_AUTH
    if error.status == 404:
        return EXIT_NOT_FOUND
    if error.status == 409:
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


@click.group(cls=Group)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of tables.")
@click.version_option(version=__version__, prog_name="gpuctl")
@click.pass_context
def cli(ctx, as_json: bool) -> None:
    """The GPU console from the terminal."""
    ctx.obj = Context(as_json)


pass_ctx = click.make_pass_decorator(Context)


def _resolve(ctx: Context, ref: str) -> dict:
    """An instance by its full id, a unique id prefix, or its exact name."""
    if len(ref) == 36:
        return ctx.client.instance(ref)
    rows = ctx.client.instances(released=True)
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
    return ctx.client.instance(matches[0]["id"])


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


def _print_entries(instance: dict) -> None:
    entries = instance.get("entry_points") or {}
    base = ""
    if entries.get("jupyterlab_url", "") and entries["jupyterlab_url"].startswith("/"):
        base = _load_config().get("url") or os.environ.get("GPUCTL_URL", "")
    for label, key in (("SSH", "ssh_command"), ("JupyterLab", "jupyterlab_url"), ("VS Code", "vscode_url")):
        value = entries.get(key)
        if value:
            out.print(
                f"  {label + ':':12} {base.rstrip('/') + value if value.startswith('/') else value}", highlight=False
            )


def _show(instance: dict) -> None:
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
    _print_entries(instance)


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
@pass_ctx
def login(ctx: Context, url: str, token: str | None, browser: bool, read_only: bool) -> None:
    """Log in (through the browser, or with a token) and keep the token in ~/.config/gpuctl/config.json."""
    if token is None:
        token = _device_login(ctx, url, browser, scope="read" if read_only else "full")
    profile = Client(url, token).profile()
    path = _config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(json.dumps({"url": url.rstrip("/"), "token": token}))
    ctx.emit(
        {"url": url, "email": profile["email"]},
        lambda: out.print(t("Logged in to {url} as {email}.", url=url, email=profile["email"]), highlight=False),
    )


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
    instance = ctx.client.launch(idempotency_key=idempotency_key, ssh_keys=list(ssh_keys) or None, **spec)
    if wait:
        instance = _wait_running(ctx, instance, timeout)
    ctx.emit(instance, lambda: _show(instance))


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
            instance = ctx.client.instance(instance["id"])
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
    rows = ctx.client.instances(status=list(status), released=released)
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
    ctx.emit(instance, lambda: _show(instance))


def _action(verb: str, doc: str):
    @click.argument("ref")
    @pass_ctx
    def command(ctx: Context, ref: str) -> None:
        instance = ctx.client.instance_action(_resolve(ctx, ref)["id"], verb)
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
    instance = ctx.client.resize(_resolve(ctx, ref)["id"], node_count=node_count)
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
    command = (instance.get("entry_points") or {}).get("ssh_command")
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
    rows = ctx.client.events(_resolve(ctx, ref)["id"])

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
    deployment = ctx.client.deploy(idempotency_key=idempotency_key, app=app, **spec)

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
    rows = ctx.client.volumes()

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
    body = ctx.client.balance()

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
    body = ctx.client.statement(month)

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
        rows = ctx.client.quota()

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
    created = ctx.client.quota_request(**body)
    ctx.emit(created, lambda: out.print(f"#{created['id']}: {created['status']}", highlight=False))


def main() -> None:
    cli(prog_name="gpuctl")


if __name__ == "__main__":
    main()
