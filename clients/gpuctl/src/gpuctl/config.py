"""Profiles: several consoles, or one console as several teams, in one TOML file.

``~/.config/gpu-console-cli/config.toml`` (``$XDG_CONFIG_HOME`` is honoured; ``GPUCTL_CONFIG`` names
another file)::

    default_profile = "work"

    [profiles.work]
    url = "https://console.example.com"
    token = "gpuc_…"

    [profiles.lab-team]            # a token scoped to a team acts on the team's account
    url = "https://console.example.com"
    token = "gpuc_…"
    team = "lab"

The profile used is ``--profile``, else ``GPUCTL_PROFILE``, else ``default_profile``; ``GPUCTL_URL``
and ``GPUCTL_TOKEN`` override its URL and token. The file is written with mode 0600: it holds tokens.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

APP = "gpu-console-cli"


def config_path() -> Path:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return Path(os.environ.get("GPUCTL_CONFIG") or base / APP / "config.toml")


def _legacy_path() -> Path:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "gpuctl" / "config.json"


def load() -> dict:
    """The whole file: ``{"default_profile": …, "profiles": {name: {url, token, team}}}``."""
    path = config_path()
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        pass
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    # gpuctl 0.1 kept one login in ~/.config/gpuctl/config.json: it reads as the profile "default".
    if "GPUCTL_CONFIG" not in os.environ:
        try:
            old = json.loads(_legacy_path().read_text())
            return {"default_profile": "default", "profiles": {"default": old}}
        except (OSError, ValueError):
            pass
    return {}


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Profile:
    name: str
    url: str | None
    token: str | None
    team: str | None = None


def profile_name(explicit: str | None, config: dict) -> str:
    return explicit or os.environ.get("GPUCTL_PROFILE") or config.get("default_profile") or "default"


def resolve(explicit: str | None) -> Profile:
    config = load()
    name = profile_name(explicit, config)
    saved = config.get("profiles", {}).get(name, {})
    return Profile(
        name=name,
        url=os.environ.get("GPUCTL_URL") or saved.get("url"),
        token=os.environ.get("GPUCTL_TOKEN") or saved.get("token"),
        team=saved.get("team"),
    )


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def dump(config: dict) -> str:
    lines = []
    if config.get("default_profile"):
        lines.append(f"default_profile = {_quote(config['default_profile'])}")
    for name, values in sorted(config.get("profiles", {}).items()):
        lines += ["", f"[profiles.{_quote(name)}]"]
        lines += [f"{key} = {_quote(str(value))}" for key, value in values.items() if value is not None]
    return "\n".join(lines) + "\n"


def save(config: dict) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(dump(config))
    return path


def profile_save(name: str, *, url: str, token: str, team: str | None = None) -> Path:
    """Save (or replace) profile ``name``; the first profile saved becomes the default."""
    config = load()
    config.setdefault("profiles", {})[name] = {"url": url.rstrip("/"), "token": token, "team": team}
    config.setdefault("default_profile", name)
    return save(config)


def profile_use(name: str) -> Path:
    config = load()
    if name not in config.get("profiles", {}):
        raise ConfigError(name)
    config["default_profile"] = name
    return save(config)


def profile_remove(name: str) -> Path:
    config = load()
    if name not in config.get("profiles", {}):
        raise ConfigError(name)
    del config["profiles"][name]
    if config.get("default_profile") == name:
        config["default_profile"] = next(iter(sorted(config["profiles"])), None)
    return save(config)
