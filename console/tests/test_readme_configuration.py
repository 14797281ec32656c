"""The README's configuration table is one unbroken table that lists every environment variable the
console reads: what an operator reads there is what the settings do.

"Reads" is found in the source, not by importing settings (which would only show the names set in
this process): console/settings/ (the package), `make run`'s launcher (console/run.py), the project modules
either imports, and the management commands.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SETTINGS = ROOT / "console/settings/__init__.py"  # and console/settings/base.py, which it imports
# What reads the configuration before and while the settings load: the settings, and `make run`.
ENTRY_POINTS = [SETTINGS, ROOT / "console/run.py"]
# The process's own environment, which the console passes on or reads as any program does.
NOT_CONFIGURATION = {"PATH", "HOME", "LANG", "LC_ALL", "SHELL", "USER", "TMPDIR", "PYTHONUNBUFFERED"}

NAME = r"""["']([A-Z][A-Z0-9_]*)["']"""
READS = [
    re.compile(rf"\bos\.environ\.get\(\s*{NAME}"),
    re.compile(rf"\bos\.getenv\(\s*{NAME}"),
    re.compile(rf"\bos\.environ\[\s*{NAME}\s*\]"),
    re.compile(rf"{NAME}\s+(?:not\s+)?in\s+os\.environ\b"),
    # The settings' helpers (env_bool, env_list) and any like them: a function named *env* given a name.
    re.compile(rf"\b\w*(?i:env)\w*\(\s*{NAME}"),
]
DJ_DATABASE_URL = re.compile(r"\bdj_database_url\.config\(")
# A copy of the environment read later: ``env = dict(os.environ)`` ... ``env.get("X")``.
ENVIRON_COPY = re.compile(
    r"\b([A-Za-z_]\w*)\s*=\s*(?:dict\(\s*os\.environ\s*\)|os\.environ\.copy\(\)|\{\s*\*\*os\.environ\s*\})"
)


def _call_text(source: str, start: int) -> str:
    """The text of the call whose opening parenthesis ends at ``start``, up to its closing one."""
    depth, i = 1, start
    while depth and i < len(source):
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    return source[start:i]


def env_names_in(source: str) -> set[str]:
    names = {m.group(1) for pattern in READS for m in pattern.finditer(source)}
    for copy in {m.group(1) for m in ENVIRON_COPY.finditer(source)}:
        reads = (rf"\b{copy}\.get\(\s*{NAME}", rf"\b{copy}\[\s*{NAME}\s*\](?!\s*=[^=])")  # not `env["X"] = ...`
        names |= {m.group(1) for pattern in reads for m in re.finditer(pattern, source)}
    for call in DJ_DATABASE_URL.finditer(source):
        # dj_database_url.config() reads DATABASE_URL, or the variable its env= names.
        named = re.search(rf"\benv\s*=\s*{NAME}", _call_text(source, call.end()))
        names.add(named.group(1) if named else "DATABASE_URL")
    return names


def _project_imports(path: Path) -> list[Path]:
    """The project's own modules that ``path`` imports (where settings may read the environment)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            base = ROOT.joinpath(*module.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.append(candidate)
    return found


def configuration_sources() -> list[Path]:
    """The entry points, the project modules they import (transitively), and the management commands."""
    seen: list[Path] = []
    todo = [path for path in ENTRY_POINTS if path.is_file()]
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.append(path)
            todo.extend(_project_imports(path))
    commands = sorted(p for p in ROOT.glob("*/management/commands/*.py") if p.name != "__init__.py")
    return seen + [p for p in commands if p not in seen]


def read_env_names() -> set[str]:
    return set().union(*(env_names_in(path.read_text()) for path in configuration_sources())) - NOT_CONFIGURATION


# --- The README's table -----------------------------------------------------------------------------------


def configuration_section() -> list[tuple[int, str]]:
    """(line number, line) from "## Configuration" to the next heading, outside code fences."""
    lines = README.read_text().splitlines()
    start = lines.index("## Configuration")
    section, fenced = [], False
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            break
        section.append((number, line))
    return section


def table_blocks(section: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Runs of consecutive lines that start with "|": each run is one markdown table."""
    blocks: list[list[tuple[int, str]]] = []
    previous = None
    for number, line in section:
        if line.lstrip().startswith("|"):
            if previous != number - 1:
                blocks.append([])
            blocks[-1].append((number, line))
            previous = number
    return blocks


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def the_table() -> list[tuple[int, str]]:
    blocks = table_blocks(configuration_section())
    if len(blocks) != 1:
        held = ", ".join(f"a table at lines {b[0][0]}-{b[-1][0]}" for b in blocks) or "none"
        pytest.fail(f"The README's configuration section must hold one unbroken table; it holds {held}.")
    return blocks[0]


def documented_names() -> set[str]:
    """The names in the first column of every table row in the section (whether or not it is one table:
    that is the next test's business, and this one's failure should list the missing names alone)."""
    names = set()
    for block in table_blocks(configuration_section()):
        for _, line in block:
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", (cells(line) or [""])[0]))
    return names


# --- Tests ------------------------------------------------------------------------------------------------


def test_the_scan_finds_the_settings_reads():
    names = read_env_names()
    assert {"DATABASE_URL", "REDIS_URL", "CONSOLE_ENV", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS"} <= names
    assert {"CONSOLE_LOCAL_BACKEND", "CONSOLE_PROXY_TRUSTED_ORIGINS", "KUBERNETES_BACKEND_OPTIONS"} <= names  # helpers
    assert "BILLING_GATEWAY_WEBHOOK_SECRET" in names  # a call spread over lines
    assert "CONSOLE_DEMO_PASSWORD" in names  # make run's launcher, or a management command
    assert "PATH" not in names


def test_the_scan_knows_every_way_settings_read_the_environment():
    source = """
A = os.environ.get("A_GET", "x")
B = os.environ["B_ITEM"]
C = env_bool(
    "C_HELPER", False)
D = env_int("D_NEW_HELPER")
if "E_IN" in os.environ: pass
F = os.getenv('F_GETENV')
DATABASES = {"default": dj_database_url.config(conn_max_age=int(os.environ.get("G_AGE", "0")))}
OTHER = dj_database_url.config(env="H_OTHER_URL")
os.environ.setdefault("NOT_READ", "1")
env = dict(os.environ)
if not env.get("I_COPY_GET") and env['J_COPY_ITEM'] == "x":
    env["NOT_READ_EITHER"] = "1"
"""
    assert env_names_in(source) == {
        "A_GET",
        "B_ITEM",
        "C_HELPER",
        "D_NEW_HELPER",
        "E_IN",
        "F_GETENV",
        "G_AGE",
        "DATABASE_URL",
        "H_OTHER_URL",
        "I_COPY_GET",
        "J_COPY_ITEM",
    }


def test_the_configuration_table_is_one_unbroken_table():
    table = the_table()
    header, separator, *rows = table
    assert cells(header[1]) == ["variable", "default", "what it does"]
    assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", separator[1].strip()), f"line {separator[0]} is not a separator"
    assert rows
    bad = [number for number, line in rows if len(cells(line)) != 3 or not re.search(r"`[A-Z]", cells(line)[0])]
    if bad:
        pytest.fail(f"README lines {bad} are not rows of `variable` | default | what it does.")


def test_every_variable_the_console_reads_is_in_the_configuration_table():
    missing = sorted(read_env_names() - documented_names())
    if missing:
        pytest.fail("The README's configuration table does not list: " + ", ".join(missing))


def test_the_configuration_table_lists_only_variables_the_console_reads():
    stale = sorted(documented_names() - read_env_names())
    if stale:
        pytest.fail("The README's configuration table lists variables nothing reads: " + ", ".join(stale))
