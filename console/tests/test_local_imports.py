"""Imports run one way, from the pages down to a small shared core, and sit at the top of their module.

An import inside a function hides a dependency from the reader and from the import contracts
(``.importlinter`` sees it, but nobody reading the module's head does); a loop or an upward import is
a design question to answer, not to hide there. So a function-local import stays only with its reason
written beside it: a comment on its line or on the line above (``# Local: <why>``). A bare pragma
(``# noqa: F401``) is not a reason.

The walk covers the project's packages (the ``root_packages`` of ``.importlinter``), less their tests
and migrations: a test may import what it likes where it likes, and a migration is frozen history.
"""

from __future__ import annotations

import ast
import configparser
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Function-local imports in files another branch is rewriting: (path, imported module). Each is still
# to be hoisted or given its reason there; remove its line here when it is (the test says when).
PENDING: set[tuple[str, str]] = set()

PRAGMA = re.compile(r"^(noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^\]]*\])?|pragma:.*)\s*")


def packages() -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config["importlinter"]["root_packages"].split()


def sources() -> list[Path]:
    return sorted(
        path
        for package in packages()
        for path in (ROOT / package).rglob("*.py")
        if not {"tests", "migrations"} & set(path.relative_to(ROOT).parts)
    )


def reasons(source: str) -> tuple[dict[int, str], set[int]]:
    """``({line: what its comment says, pragmas removed}, {lines that hold only a comment})``."""
    said: dict[int, str] = {}
    alone: set[int] = set()
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        text = token.string.lstrip("#").strip()
        while (match := PRAGMA.match(text)) and match.group(0):
            text = text[match.end() :].strip()
        if text:
            said[line] = text
        if lines[line - 1].lstrip().startswith("#"):
            alone.add(line)
    return said, alone


def local_imports(path: Path) -> list[tuple[int, int, str]]:
    """``[(first line, last line, module)]`` of every import inside a function of ``path``."""
    found = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.ImportFrom):
                found.append((child.lineno, child.end_lineno, "." * child.level + (child.module or "")))
            elif in_function and isinstance(child, ast.Import):
                found.extend((child.lineno, child.end_lineno, alias.name) for alias in child.names)
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    walk(ast.parse(path.read_text(), filename=str(path)), False)
    return found


def unexplained() -> set[tuple[str, int, str, str]]:
    """Every function-local import with no reason beside it: ``{(path, line, module, the line's text)}``."""
    missing = set()
    for path in sources():
        imports = local_imports(path)
        if not imports:
            continue
        source = path.read_text()
        said, alone = reasons(source)
        lines = source.splitlines()
        for first, last, module in imports:
            on_its_lines = any(line in said for line in range(first, last + 1))
            above = first - 1 in said and first - 1 in alone
            if not (on_its_lines or above):
                missing.add((str(path.relative_to(ROOT)), first, module, lines[first - 1].strip()))
    return missing


def test_every_function_local_import_says_why_it_is_not_at_the_top():
    missing = sorted(found for found in unexplained() if (found[0], found[2]) not in PENDING)
    assert not missing, (
        "Imports inside functions with no reason beside them. Move each to the top of its module; if it "
        "must stay (a loop you cannot break cheaply, a module that must load without Django, ...), say "
        "why in a comment on the line above, `# Local: <why>`:\n"
        + "\n".join(f"  {path}:{line}: {text}" for path, line, _module, text in missing)
    )


def test_the_pending_list_holds_only_imports_still_unexplained():
    still = {(path, module) for path, _line, module, _text in unexplained()}
    answered = sorted(PENDING - still)
    assert not answered, f"Answered since: remove them from PENDING: {answered}"


def test_the_walk_sees_a_local_import_and_its_reason(tmp_path):
    module = tmp_path / "example.py"
    module.write_text(
        "import os\n"
        "\n"
        "def bare():\n"
        "    import json\n"
        "\n"
        "def pragma_only():\n"
        "    from re import compile  # noqa: F401\n"
        "\n"
        "def explained():\n"
        "    # Local: only the job's nodes need it.\n"
        "    import shlex\n"
        "\n"
        "def explained_beside():\n"
        "    import csv  # noqa: F401 (registers a dialect)\n"
    )
    said, alone = reasons(module.read_text())
    imports = local_imports(module)
    assert [m for _f, _l, m in imports] == ["json", "re", "shlex", "csv"]
    assert said == {10: "Local: only the job's nodes need it.", 14: "(registers a dialect)"}
    assert alone == {10}
