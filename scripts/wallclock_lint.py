"""Flag wall-clock limits under 2 s in the tests, and timing assertions, unless the line says why.

    python scripts/wallclock_lint.py [PATH ...]     (default: every test module of the project)

A test that gives something 0.3 s to happen passes on an idle laptop and fails on CI's two busy
cores. Tests wait for events with generous deadlines; timing goals belong in `bench/`. This lint
(run by `make test`) finds, in test modules and their helpers:

- a timeout, deadline or wait under 2 s: `timeout=0.5`, `REQUEST_TIMEOUT_S=0.3`, `settings.X_TIMEOUT = 1`,
  `{"DEADLINE_S": 1}`, `time.monotonic() + 1`, `event.wait(0.5)`, `thread.join(1)`;
  Playwright's in milliseconds (`timeout=1500`, `set_default_timeout(1000)`) count too;
- an assertion that something took less than a bound: `assert elapsed < GOAL_S`,
  `assert time.monotonic() - started < 5`.

A line that must keep one says why in a comment on it or on the line above, starting `wall-clock:`
(for example a server the test holds silent, so the short timeout fires however slow the machine is).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 2.0
SKIP_DIRS = {".venv", "var", "staticfiles", "node_modules", ".git", "migrations", "locale", "static"}
MARK = "wall-clock:"

# A name that holds a limit on how long to wait (not a polling interval or an injected delay).
LIMIT_NAME = re.compile(r"timeout|deadline|patience|within|wait_s$|wait_seconds", re.IGNORECASE)
# A name that holds a measured duration.
DURATION_NAME = re.compile(r"elapsed|took|duration|latency|wall|spent", re.IGNORECASE)
# Calls whose first positional argument is a timeout in seconds.
POSITIONAL_TIMEOUT = {"wait", "join", "recv", "receive_output"}
# Playwright takes milliseconds.
PLAYWRIGHT_MS = {
    "set_default_timeout",
    "set_default_navigation_timeout",
    "wait_for_timeout",
    "to_be_visible",
    "to_be_hidden",
    "to_have_text",
    "to_contain_text",
    "to_have_count",
    "to_have_url",
    "to_have_attribute",
    "to_have_value",
    "to_be_enabled",
    "to_be_disabled",
    "to_be_checked",
    "wait_for",
    "wait_for_selector",
    "wait_for_function",
    "wait_for_url",
    "wait_for_load_state",
    "goto",
    "click",
    "fill",
}


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int
    what: str

    def __str__(self) -> str:
        try:
            shown = self.path.relative_to(ROOT)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}: {self.what}"


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def _is_clock(node: ast.AST) -> bool:
    """`time.monotonic()`, `time.time()`, `time.perf_counter()` or a bare `monotonic()`."""
    return isinstance(node, ast.Call) and _name_of(node.func) in {"monotonic", "time", "perf_counter"}


def _short(seconds: float | None) -> bool:
    return seconds is not None and 0 < seconds < LIMIT_S


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append((node.lineno, what))

    def visit_Call(self, node: ast.Call) -> None:
        method = _name_of(node.func)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        in_ms = method in PLAYWRIGHT_MS and not (isinstance(receiver, ast.Name) and receiver.id == "asyncio")
        for keyword in node.keywords:
            value = _number(keyword.value)
            if keyword.arg and LIMIT_NAME.search(keyword.arg) and value is not None:
                seconds = value / 1000 if in_ms and keyword.arg == "timeout" else value
                if _short(seconds):
                    self._flag(keyword.value, f"{keyword.arg}={value:g} is a wall-clock limit under {LIMIT_S:g} s")
        if node.args:
            value = _number(node.args[0])
            if method in {"set_default_timeout", "set_default_navigation_timeout"} and value is not None:
                if _short(value / 1000):
                    self._flag(node, f"{method}({value:g}) is a wall-clock limit under {LIMIT_S:g} s")
            elif method in POSITIONAL_TIMEOUT and isinstance(node.func, ast.Attribute) and _short(value):
                self._flag(node, f".{method}({value:g}) is a wall-clock limit under {LIMIT_S:g} s")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Add) and _is_clock(node.left) and _short(_number(node.right)):
            self._flag(node, f"a deadline {_number(node.right):g} s from now is under {LIMIT_S:g} s")
        self.generic_visit(node)

    def _assigned(self, targets: list[ast.AST], value: ast.AST) -> None:
        seconds = _number(value)
        for target in targets:
            name = _name_of(target)
            if name and LIMIT_NAME.search(name) and _short(seconds):
                self._flag(value, f"{name} = {seconds:g} is a wall-clock limit under {LIMIT_S:g} s")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assigned([node.target], node.value)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if key is not None and LIMIT_NAME.search(_name_of(key)) and _short(_number(value)):
                self._flag(value, f"{_name_of(key)!r}: {_number(value):g} is a wall-clock limit under {LIMIT_S:g} s")
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(op, ast.Lt | ast.LtE):
                measured = left
            elif isinstance(op, ast.Gt | ast.GtE):
                measured = right
            else:
                measured = None
            if measured is not None and self._is_duration(measured):
                self._flag(node, "asserts that something took less than a bound: a timing goal belongs in bench/")
        self.generic_visit(node)

    @staticmethod
    def _is_duration(node: ast.AST) -> bool:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _is_clock(node.left):
            return True
        if isinstance(node, ast.Call) and _name_of(node.func) == "total_seconds":
            return DURATION_NAME.search(ast.unparse(node.func)) is not None
        name = _name_of(node)
        return bool(name) and DURATION_NAME.search(name) is not None and not name.isupper()


def _explained(lines: list[str], line: int) -> bool:
    here = lines[line - 1] if line - 1 < len(lines) else ""
    above = lines[line - 2] if line >= 2 else ""
    return MARK in here or (above.lstrip().startswith("#") and MARK in above)


def check_source(source: str, path: Path) -> list[Finding]:
    tree = ast.parse(source, filename=str(path))
    visitor = _Visitor()
    visitor.visit(tree)
    lines = source.splitlines()
    seen: set[tuple[int, str]] = set()
    findings = []
    for line, what in visitor.found:
        if (line, what) in seen or _explained(lines, line):
            continue
        seen.add((line, what))
        findings.append(Finding(path, line, what))
    return sorted(findings, key=lambda f: (str(f.path), f.line))


def test_modules(root: Path = ROOT) -> Iterator[Path]:
    """Test modules and their helpers: anything under a `tests` folder, and every conftest.py."""
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if SKIP_DIRS.intersection(parts[:-1]):
            continue
        if "tests" in parts[:-1] or path.name == "conftest.py":
            yield path


def main(argv: list[str]) -> int:
    paths = [Path(p).resolve() for p in argv] or list(test_modules())
    findings = [f for path in paths for f in check_source(path.read_text(), path)]
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"\n{len(findings)} wall-clock limit(s) in tests. Wait for the event with a generous deadline, inject the "
            f"clock, or move the goal to bench/; if the line must stay, say why in a '# {MARK} ...' comment.",
            file=sys.stderr,
        )
        return 1
    print(f"wallclock-lint: {len(paths)} test modules, no wall-clock limit under {LIMIT_S:g} s without a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
