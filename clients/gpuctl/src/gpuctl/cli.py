"""``gpuctl``: launch, list, reach and stop GPU instances, copy files (``cli_files``), forward ports
(``cli_ssh``), deploy apps and read the balance; what the commands share is ``cli_base``. The
distribution is ``gpu-console-cli`` on the package index; the command is ``gpuctl``.

Tables by default, JSON with ``--json`` (one JSON document on stdout, nothing else there; ``logs -f``
prints one JSON object a line), so scripts can rely on both the output and the exit code.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import time
import webbrowser
from pathlib import Path

import click
from click.shell_completion import get_completion_class
from rich.table import Table

from gpuctl import cli_files, cli_secrets, cli_snapshots, cli_ssh, config  # noqa: F401  (their commands register on cli)
from gpuctl.api import Client
from gpuctl.cli_base import (
    EXIT_AUTH,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    FAILED_STATUSES,
    Context,
    Group,
    _fail,
    _instance_table,
    _resolve,
    _show,
    _yuan,
    cli,
    err,
    out,
    pass_ctx,
)
from gpuctl.client import ApiError, device_login_poll, device_login_start
from gpuctl.messages import t

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
@click.option(
    "--secret", "secret_files", multiple=True, help="A secret it gets as /run/console-secrets/NAME (repeatable)."
)
@click.option(
    "--secret-env", "secret_envs", multiple=True, help="A secret it gets as that file and variable (repeatable)."
)
@click.option("--idempotency-key", default=None, help="Reuse to retry safely; a random one by default.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until it runs.")
@click.option("--timeout", default=600, show_default=True, help="Seconds to wait.")
@pass_ctx
def launch(
    ctx: Context,
    wait: bool,
    timeout: int,
    idempotency_key: str | None,
    ssh_keys,
    secret_files,
    secret_envs,
    **spec,
) -> None:
    """Launch an instance, wait until it runs, and print how to reach it."""
    chosen = [{"name": n, "env": False} for n in secret_files if n not in secret_envs]
    chosen += [{"name": n, "env": True} for n in secret_envs]
    body = {
        k: v
        for k, v in {**spec, "ssh_keys": list(ssh_keys) or None, "secrets": chosen or None}.items()
        if v is not None
    }
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


@cli.command()
@click.argument("ref")
@click.option(
    "--wait",
    "wait_in_line",
    is_flag=True,
    help="When no cards are free now, wait in line: it starts by itself when cards free up, and you are told.",
)
@click.option(
    "--no-gpu",
    is_flag=True,
    help="Without GPU: the same disk and image, CPU only, at the no-GPU price (no cards, no GPU quota). "
    "Stop and start again (without the flag) to get its cards.",
)
@pass_ctx
def start(ctx: Context, ref: str, wait_in_line: bool, no_gpu: bool) -> None:
    """Start a stopped instance (--no-gpu: without cards; --wait: wait in line for cards)."""
    if wait_in_line and no_gpu:
        raise click.UsageError(t("--wait and --no-gpu exclude each other: a start without GPU takes no cards."))
    body = {"wait": True} if wait_in_line else {"no_gpu": True} if no_gpu else None
    instance = ctx.client.instances_start(_resolve(ctx, ref)["id"], body)
    ctx.emit(instance, lambda: _print_start(instance))


def _print_start(instance: dict) -> None:
    name = instance["name"] or instance["id"][:8]
    if instance.get("queue_position"):
        out.print(
            t(
                "{name}: waiting in line for cards since {since} (position {n}). `gpuctl leave-queue {name}` leaves.",
                name=name,
                since=instance["start_queued_at"][:16].replace("T", " "),  # the console's local time, to the minute
                n=instance["queue_position"],
            ),
            highlight=False,
            soft_wrap=True,
        )
    elif instance.get("no_gpu"):
        out.print(t("{name}: {status}, without GPU", name=name, status=instance["status_display"]), highlight=False)
    else:
        out.print(f"{name}: {instance['status_display']}", highlight=False)


@cli.command(name="leave-queue")
@click.argument("ref")
@pass_ctx
def leave_queue(ctx: Context, ref: str) -> None:
    """Leave the line of starts waiting for cards (the instance stays stopped)."""
    instance = ctx.client.instances_leave_queue(_resolve(ctx, ref)["id"])
    ctx.emit(
        instance,
        lambda: out.print(
            t(
                "{name} left the line; it stays {status}.",
                name=instance["name"] or instance["id"][:8],
                status=instance["status_display"],
            ),
            highlight=False,
        ),
    )


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
@click.argument("ref")
@pass_ctx
def runs(ctx: Context, ref: str) -> None:
    """The W&B runs instance REF started (wandb.init in it), newest first, with their links."""
    rows = ctx.client.instances_runs_list(_resolve(ctx, ref)["id"])

    def render() -> None:
        if not rows:
            out.print(t("No W&B runs recorded: a program that calls wandb.init on a running instance shows here."))
            return
        for row in rows:
            where = "/".join(part for part in (row["entity"], row["project"]) if part)
            out.print(f"{row['name'] or row['id']}  {where}  {row['url']}", highlight=False, soft_wrap=True)

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


@cli.group(cls=Group, invoke_without_command=True)
@click.pass_context
def images(click_ctx) -> None:
    """Images saved from your instances, built or imported: list (the default), save, recipe, build, import,
    rename, share, delete. Launch from one with `gpuctl launch --image <its id>`."""
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(images_list)


def _image_line(image: dict) -> str:
    size = f"{image['size_bytes'] / 2**30:.2f} GB" if image.get("size_bytes") else "—"
    return f"{image['id']}  {image['name']}:{image['tag']}  {image['status']}  {size}"


@images.command(name="list")
@pass_ctx
def images_list(ctx: Context) -> None:
    """List your saved images with their size and state."""
    rows = list(ctx.client.images_list())

    def render() -> None:
        if not rows:
            out.print(t("No saved images. Save one with `gpuctl images save INSTANCE NAME`."), highlight=False)
            return
        table = Table(box=None, header_style="bold")
        for column in ("ID", t("Name"), t("Status"), "GB", t("Team"), t("Created")):
            table.add_column(column)
        for row in rows:
            table.add_row(
                row["id"],
                f"{row['name']}:{row['tag']}",
                row["status"] + (f" ({row['status_reason']})" if row.get("status_reason") else ""),
                f"{row['size_bytes'] / 2**30:.2f}" if row["size_bytes"] else "—",
                t("shared") if row["shared"] else "",
                (row.get("created_at") or "")[:16].replace("T", " "),
            )
        out.print(table)

    ctx.emit(rows, render)


@images.command(name="save")
@click.argument("ref")
@click.argument("name")
@click.option("--tag", default="latest", show_default=True)
@click.option("--note", default="", help="What is in it, for you and your team.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until it is ready (or failed).")
@pass_ctx
def images_save(ctx: Context, ref: str, name: str, tag: str, note: str, wait: bool) -> None:
    """Save instance REF (running or stopped) as image NAME: its system (packages, files outside
    /home/user and volumes), never the console's tokens or keys. Billed per GB-day while it exists."""
    instance = _resolve(ctx, ref)
    image = ctx.client.instances_save_image(instance["id"], {"name": name, "tag": tag, "note": note})
    if not ctx.as_json:
        out.print(
            t("Saving {name}:{tag} ({id})…", name=image["name"], tag=image["tag"], id=image["id"]), highlight=False
        )
    while wait and image["status"] == "saving":
        time.sleep(float(os.environ.get("GPUCTL_POLL_S", 2)))
        image = ctx.client.images_get(image["id"])
    if image["status"] == "failed":
        _fail(EXIT_FAILED, image.get("status_reason") or image["status"], "image_save_failed", ctx.as_json)
    ctx.emit(image, lambda: out.print(_image_line(image), highlight=False))


@images.command(name="import")
@click.argument("reference")
@click.option("--name", default="", help="Its name here (default: the repository's last part).")
@click.option("--tag", default="", help="Its tag here (default: the reference's).")
@click.option("--note", default="", help="A note shown beside it.")
@pass_ctx
def images_import(ctx: Context, reference: str, name: str, tag: str, note: str) -> None:
    """Bring your own image REFERENCE (registry/repository:tag or @sha256:…) from a registry the console
    allows: it is inspected there (with your login for that registry, `gpuctl registries login`) and
    recorded ready, pinned to its digest. Says its size, platform and whether it follows the image contract."""
    image = ctx.client.images_import({"reference": reference, "name": name, "tag": tag, "note": note})

    def render() -> None:
        out.print(_image_line(image), highlight=False)
        out.print(f"  {image.get('platform', '')}  {image.get('reference', '')}", highlight=False)
        if image.get("follows_contract"):
            out.print(t("  Follows the image contract."), highlight=False)
        else:
            out.print(
                t("  Does not follow the image contract: the console mounts its start script at launch."),
                highlight=False,
            )

    ctx.emit(image, render)


@images.command(name="recipe")
@click.argument("image_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write it to this file.")
@pass_ctx
def images_recipe(ctx: Context, image_id: str, output: str | None) -> None:
    """Print the recipe (a Containerfile) that rebuilds image IMAGE_ID, or write it to a file: edit it and
    build a new image with `gpuctl images build -f Containerfile NAME:TAG`."""
    text = b"".join(ctx.client.images_recipe(image_id)).decode()
    if output:
        Path(output).write_text(text)
    if ctx.as_json:
        ctx.emit({"id": image_id, "recipe": text}, lambda: None)
    elif not output:
        click.echo(text, nl=False)


@images.command(name="build")
@click.argument("name_tag", metavar="NAME[:TAG]")
@click.option(
    "-f", "--file", "path", required=True, type=click.Path(exists=True, dir_okay=False), help="The recipe to build."
)
@click.option("--note", default="", help="What is in it, for you and your team.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until it is ready (or failed).")
@pass_ctx
def images_build(ctx: Context, name_tag: str, path: str, note: str, wait: bool) -> None:
    """Build image NAME[:TAG] from a recipe (a Containerfile: start from `gpuctl images recipe ID`) with the
    console's builder. It starts FROM one of your images, your team's shared ones or the catalogue's, and
    copies files only --from such images. Billed per GB-day like a saved image once ready; a failed build
    shows its log's tail and bills nothing."""
    name, _colon, tag = name_tag.partition(":")
    body = {"recipe": Path(path).read_text(), "name": name, "tag": tag or "latest", "note": note}
    image = ctx.client.images_build(body)
    if not ctx.as_json:
        out.print(
            t("Building {name}:{tag} ({id})…", name=image["name"], tag=image["tag"], id=image["id"]), highlight=False
        )
    while wait and image["status"] == "building":
        time.sleep(float(os.environ.get("GPUCTL_POLL_S", 2)))
        image = ctx.client.images_get(image["id"])
    if image["status"] == "failed":
        _fail(EXIT_FAILED, image.get("status_reason") or image["status"], "image_build_failed", ctx.as_json)
    ctx.emit(image, lambda: out.print(_image_line(image), highlight=False))


@images.command(name="rename")
@click.argument("image_id")
@click.argument("name", required=False)
@click.option("--note", default=None, help="A new note.")
@pass_ctx
def images_rename(ctx: Context, image_id: str, name: str | None, note: str | None) -> None:
    """Rename a saved image (its pushed reference stays), or change its note."""
    body = {k: v for k, v in {"name": name, "note": note}.items() if v is not None}
    image = ctx.client.images_rename(image_id, body)
    ctx.emit(image, lambda: out.print(_image_line(image), highlight=False))


@images.command(name="share")
@click.argument("image_id")
@click.option("--off", is_flag=True, help="Stop sharing it.")
@pass_ctx
def images_share(ctx: Context, image_id: str, off: bool) -> None:
    """Share a team's saved image with every member (they may launch from it), or stop (--off)."""
    image = ctx.client.images_share(image_id, {"shared": not off})
    ctx.emit(image, lambda: out.print(_image_line(image), highlight=False))


@images.command(name="delete")
@click.argument("image_id")
@pass_ctx
def images_delete(ctx: Context, image_id: str) -> None:
    """Delete a saved image; refused while an instance uses it (release those first)."""
    ctx.client.images_delete(image_id)
    ctx.emit({"id": image_id, "deleted": True}, lambda: out.print(t("Deleted {id}.", id=image_id), highlight=False))


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
