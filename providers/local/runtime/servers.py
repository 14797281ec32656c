"""How each user server is started: argv, environment and config files, one function per server.

The runtime (``supervisor``) owns processes and ports; these functions only describe commands, so a
test can read exactly what would run. Every server listens on 127.0.0.1 only (or the node's address
``bind`` that a Slurm job gives, for a console on another machine) and is reached through
the console's authenticating proxy (``console.reverse_proxy``), which injects the server's own secret:

- JupyterLab: ``JUPYTER_TOKEN`` in its environment (never argv, which ``ps`` shows to every local
  user); the proxy sends ``Authorization: token …``.
- code-server: ``--auth password`` with ``HASHED_PASSWORD`` set to a random 64-hex secret. code-server
  treats a non-argon2 value as a legacy SHA-256 hash and accepts a session cookie equal to it, so the
  proxy sends ``Cookie: code-server-session=<secret>``. We do not use ``--auth none``: a bare port on
  127.0.0.1 would then be open to every process on the host, including other users' instances.
- sshd: key log-in only, with the keys the owner chose at launch.
"""

from __future__ import annotations

import getpass
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

LAB, CODE, SSH, APP, WEBUI = "lab", "code", "ssh", "app", "webui"
ALL_SERVICES = (LAB, CODE, SSH)  # the entry points every instance gets
# Plus a deployment's app server and its separate WebUI, for instances that have them.
KNOWN_SERVICES = (*ALL_SERVICES, APP, WEBUI)
CODE_SERVER_COOKIE = "code-server-session"


@dataclass(frozen=True)
class ServerCommand:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""


@dataclass(frozen=True)
class Paths:
    """The instance's directory: ``home`` is its disk (the user's files); ``run`` is ours."""

    base: Path

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def run(self) -> Path:
        return self.base / "run"

    @property
    def meta(self) -> Path:
        return self.run / "meta.json"

    def pidfile(self, service: str) -> Path:
        return self.run / f"{service}.pid"

    def log(self, service: str) -> Path:
        return self.run / f"{service}.log"


def jupyter_command(
    *, paths: Paths, port: int, base_url: str, token: str, jupyter_bin: str, bind: str = "127.0.0.1"
) -> ServerCommand:
    argv = [
        jupyter_bin,
        "lab",
        "--no-browser",
        "--allow-root",
        f"--ServerApp.ip={bind}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={base_url}",
        f"--ServerApp.root_dir={paths.home}",
        # The proxy strips Origin (it checks it itself) and connects as 127.0.0.1: nothing remote. On
        # another address the console connects from elsewhere; the token still guards every request.
        f"--ServerApp.allow_remote_access={bind not in ('127.0.0.1', 'localhost')}",
        "--ServerApp.open_browser=False",
        "--LabApp.news_url=",  # no calls home from the browser
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # No extension manager: it would query PyPI and run yarn/npm at every start (a second here).
        "--LabApp.extension_manager=readonly",
        "--LanguageServerManager.autodetect=False",  # jupyter-lsp would run npm to look for servers
        f"--config={paths.run / 'jupyter_server_config.py'}",
    ]
    env = {
        "JUPYTER_TOKEN": token,
        "JUPYTER_CONFIG_DIR": str(paths.home / ".jupyter"),
        "JUPYTER_DATA_DIR": str(paths.home / ".local/share/jupyter"),
        "JUPYTER_RUNTIME_DIR": str(paths.run / "jupyter-runtime"),
        "IPYTHONDIR": str(paths.home / ".ipython"),
    }
    return ServerCommand(LAB, argv, env, str(paths.home))


JUPYTER_CONFIG = """# Written by the console's local runtime.
import os

# Take the token out of the environment, so kernels and terminals (which inherit it) never see it.
c.IdentityProvider.token = os.environ.pop("JUPYTER_TOKEN", "")


def _without_token(handler, page_config):
    # JupyterLab puts the token in every page for its own requests; the console's proxy adds it to
    # each request instead, so the page needs none (JupyterHub blanks it for the same reason).
    page_config["token"] = ""
    return page_config


c.ServerApp.tornado_settings = {"page_config_hook": _without_token}
"""


def jupyter_files(*, paths: Paths) -> dict[Path, str]:
    return {paths.run / "jupyter_server_config.py": JUPYTER_CONFIG}


def code_server_command(
    *, paths: Paths, port: int, secret: str, code_server_entry: str, node_bin: str = "node", bind: str = "127.0.0.1"
) -> ServerCommand:
    argv = [
        node_bin,
        code_server_entry,
        "--bind-addr",
        f"{bind}:{port}",
        "--auth",
        "password",
        "--disable-telemetry",
        "--disable-update-check",
        "--disable-workspace-trust",
        "--user-data-dir",
        str(paths.home / ".local/share/code-server"),
        "--extensions-dir",
        str(paths.home / ".local/share/code-server/extensions"),
        str(paths.home),
    ]
    return ServerCommand(CODE, argv, {"HASHED_PASSWORD": secret}, str(paths.home))


def paths_translate(text: str, mounts: dict[str, str]) -> str:
    """``text`` with every path under a mount point (``/mnt/data/runs``) moved to where that mount
    appears on this host (``<home>/mnt/data/runs``).

    Instances of this runtime share the host's filesystem, so a volume "mounted at /mnt/data" lives
    under the instance's home; an app's command, written for a container where it is at /mnt/data,
    is pointed there. Only whole path components match: ``/mnt/database`` is not under ``/mnt/data``.
    """
    for point in sorted(mounts, key=len, reverse=True):
        pattern = re.compile(r"(?<![\w./-])" + re.escape(point.rstrip("/")) + r"(?=/|$|[\s'\":;,])")
        text = pattern.sub(lambda _match, target=mounts[point]: target, text)
    return text


def app_command(
    *,
    paths: Paths,
    port: int,
    base_path: str,
    app: dict,
    secret: str,
    mounts: dict[str, str] | None = None,
    webui_port: int | None = None,
    name: str = APP,
    host: str = "127.0.0.1",
) -> ServerCommand:
    """A one-click deployment's server (``backends.AppLaunch`` as a dict), run like the other servers.

    The placeholders the console left in its command are filled in here: ``{port}`` (a free port of
    ours), ``{host}`` (the runtime's bind address, 127.0.0.1 unless a Slurm node serves a remote console) and ``{base_path}`` (the proxy's prefix).
    ``APP_API_KEY`` is a secret of ours that the proxy sends as a Bearer token, for servers that take
    one (vLLM's ``--api-key $APP_API_KEY``), so the bare port refuses other local users.
    """
    values = {"{port}": str(port), "{host}": host, "{base_path}": base_path.rstrip("/")}
    if webui_port is not None:
        values["{webui_port}"] = str(webui_port)

    def fill(text: str) -> str:
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        return paths_translate(text, mounts or {})

    argv = [fill(arg) for arg in app["argv"]]
    env = {str(k): fill(str(v)) for k, v in app.get("env", [])}
    env.update(APP_BASE_PATH=base_path.rstrip("/"), APP_API_KEY=secret)
    env.setdefault("PORT", str(webui_port if name == WEBUI and webui_port is not None else port))
    return ServerCommand(name, argv, env, str(paths.home))


def app_program(argv) -> str:
    """The program an app's command runs: argv[0], or for ``sh -c "…"`` the first word that is not
    ``exec``, ``env`` or a ``NAME=value`` assignment."""
    argv = list(argv)
    if not argv:
        return ""
    if Path(argv[0]).name in ("sh", "bash") and len(argv) >= 3 and argv[1] == "-c":
        try:
            words = shlex.split(argv[2])
        except ValueError:
            return ""
        for word in words:
            if word in ("exec", "env") or ("=" in word and not word.startswith(("/", "."))):
                continue
            return word
        return ""
    return argv[0]


def sshd_login_user() -> str:
    """sshd can only log in as the account it runs as (or any, as root): the runtime's own account."""
    return getpass.getuser()


def sshd_files(
    *,
    paths: Paths,
    port: int,
    authorized_keys: list[str],
    env: dict[str, str],
    sftp_server: str,
    bind: str = "127.0.0.1",
) -> dict[Path, str]:
    """The config, authorized keys and log-in wrapper of the instance's sshd."""
    run = paths.run
    wrapper = run / "ssh-session"
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
    config = f"""# The sshd of one instance; written by the console's local runtime.
Port {port}
ListenAddress {bind}
HostKey {run / "ssh_host_ed25519_key"}
PidFile none
AuthorizedKeysFile {run / "authorized_keys"}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowUsers {sshd_login_user()}
X11Forwarding no
PrintMotd no
PermitUserEnvironment no
ForceCommand {wrapper}
Subsystem sftp {sftp_server}
"""
    # Every session starts in the instance's disk with its GPUs and volumes in the environment.
    session = f"""#!/bin/sh
{exports}cd "$HOME" 2>/dev/null || cd /
if [ -n "$SSH_ORIGINAL_COMMAND" ]; then exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"; fi
exec "${{SHELL:-/bin/sh}}" -l
"""
    return {
        run / "sshd_config": config,
        run / "authorized_keys": "".join(key.strip() + "\n" for key in authorized_keys if key.strip()),
        wrapper: session,
    }


def sshd_command(*, paths: Paths, sshd_bin: str) -> ServerCommand:
    return ServerCommand(SSH, [sshd_bin, "-D", "-e", "-f", str(paths.run / "sshd_config")], {}, str(paths.home))
