"""Every hot path's bench in one run: one table of figures, and the configuration they ran under.

    make bench                       # .venv/bin/python bench/run.py
    make bench QUICK=1               # fewer iterations, smaller data: a sanity check, not a measure
    make bench BASE=<commit>         # the same table for <commit> too, alternating, with ratios
    make bench ONLY=metering,list    # some of the benches

The benches: launch, list, metering, sql_gain (what ``core.sql`` saves a launch), scheduler, metrics,
gateway and spawn. Each (``bench/<name>.py``) runs as a subprocess, as you would run it by hand, and ends with one
line of JSON; this takes the headline figures from it (``BENCHES`` says which, and whether more or
less is better). The table is printed and written, with every bench's whole JSON and the
configuration (the commit, the settings that change what is measured, the versions of Python,
Django, PostgreSQL, Redis and the libraries the speed-ups reach into), to ``var/bench/<time>.json``
(``--out``).

With ``--base``, the base commit is checked out in a temporary git worktree (which reuses this
checkout's ``.venv``), and head's ``bench/`` is copied into it, so both sides run the same
measurement and only the code measured differs. Each round runs every bench on one side then the
other, the order swapped each round, so a machine that gets busier part-way hurts both alike. A
figure is flagged (red) when its median is more than 20 % worse than the base's *and* every head run
is worse than every base run: a difference inside the spread of the runs is noise, not a regression.
A bench that cannot run here (sshd or podman missing) is listed as skipped, with its reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOWER, HIGHER = "lower", "higher"  # which way a figure is better
WORSE_BEYOND = 0.20  # a figure this much worse than its base (and beyond the runs' spread) is flagged


@dataclass(frozen=True)
class Figure:
    key: str  # a key of the bench's JSON line; dots go into nested objects ("added_ms", "throughput_mb_s.gateway")
    better: str = LOWER


@dataclass(frozen=True)
class Bench:
    name: str  # bench/<name>.py
    figures: tuple[Figure, ...]
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    quick_env: dict[str, str] = field(default_factory=dict)
    timeout_s: int = 1800


#: The hot paths, with the figures that judge them (each bench's JSON holds more: see its docstring).
BENCHES: dict[str, Bench] = {
    b.name: b
    for b in (
        Bench(
            "launch",
            (
                Figure("web_and_worker_cpu_ms_per_launch"),
                Figure("request_to_running_p50_ms"),
                Figure("api_post_p50_ms"),
                Figure("throughput_running_per_s", HIGHER),
            ),
            quick_env={"BENCH_CLIENTS": "4", "BENCH_PER_CLIENT": "3"},
        ),
        Bench(
            "list",
            (
                Figure("api_p50_ms_page100"),
                Figure("page_p50_ms_page100"),
                Figure("api_queries_page100"),
                Figure("page_queries_page100"),
            ),
            quick_env={"BENCH_INSTANCES": "300", "BENCH_REQUESTS": "10"},
        ),
        Bench(
            "metering",
            (
                Figure("tick_s_median"),
                Figure("tick_cpu_s_median"),
                Figure("queries_per_tick"),
            ),
            quick_args=("--meters", "200", "--small", "20", "--ticks", "2"),
            # Its database is dropped and made again: never the one DATABASE_URL names in your shell.
            env={
                "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/console_bench",
            },
        ),
        Bench(
            "sql_gain",  # what core.sql's fixed statements save a launch (it keeps those at 5 % or more)
            (Figure("instance_read_share_of_launch_pct", HIGHER),),
            quick_env={"BENCH_SQL_CALLS": "20", "BENCH_SQL_LAUNCHES": "5"},
        ),
        Bench(
            "scheduler",
            (
                Figure("gang_1024_cards_launch_p50_ms"),
                Figure("single_placements_per_s", HIGHER),
                Figure("single_launches_per_s", HIGHER),
                Figure("preemption_decision_8_cards_p50_ms"),
                Figure("cluster_8192_cards_launch_to_running_s"),
            ),
            quick_env={"BENCH_SAMPLES": "5", "BENCH_PLACEMENTS": "500"},
        ),
        Bench(
            "metrics",
            (
                Figure("ingest_one_tick_ms"),
                Figure("rollup_run_median_ms"),
                Figure("chart_1d_p50_ms"),
                Figure("chart_7d_p50_ms"),
                Figure("list_25_instances_p50_ms"),
            ),
            quick_env={"BENCH_INSTANCES": "50", "BENCH_QUERIES": "5"},
        ),
        Bench(
            "gateway",
            (
                Figure("connect_p50_ms.gateway"),
                Figure("keystroke_p50_ms.gateway"),
                Figure("throughput_mb_s.gateway", HIGHER),
            ),
            quick_args=("--runs", "3", "--megabytes", "16"),
        ),
        Bench(
            "spawn",
            (Figure("spawn_p50_s"),),
            quick_args=("--runs", "1"),
            env={"DATABASE_URL": "postgres://unused@127.0.0.1:1/unused"},  # it writes no row (see its docstring)
        ),
    )
}


# --- Comparing runs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    base: float  # the medians
    head: float
    ratio: float  # head / base
    worse_pct: float  # how much worse head is (negative: better), in the figure's own direction
    flagged: bool


def compare(base_runs: Sequence[float], head_runs: Sequence[float], better: str) -> Comparison | None:
    """Head against base for one figure, from each side's runs (None when either side has none).

    Flagged when the median is more than ``WORSE_BEYOND`` worse *and* the runs do not overlap (head's
    best worse than base's worst): one unlucky run on a busy machine flags nothing.
    """
    if not base_runs or not head_runs:
        return None
    base, head = statistics.median(base_runs), statistics.median(head_runs)
    ratio = head / base if base else (1.0 if head == base else float("inf"))
    if better == LOWER:
        worse = ratio - 1 if base else (0.0 if head == base else float("inf"))
        beyond_spread = min(head_runs) > max(base_runs)
    else:
        worse = (1 / ratio - 1) if head else (0.0 if head == base else float("inf"))
        beyond_spread = max(head_runs) < min(base_runs)
    return Comparison(base, head, ratio, 100 * worse, worse > WORSE_BEYOND and beyond_spread)


def figure_value(result: dict, key: str) -> float | None:
    """``key`` (dotted into nested objects) of a bench's JSON, or None when it has no such number."""
    value: object = result
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# --- Running ----------------------------------------------------------------------------------------


@dataclass
class Run:
    """One run of one bench on one side."""

    bench: str
    side: str  # "head" or "base"
    ok: bool
    seconds: float
    result: dict = field(default_factory=dict)
    reason: str = ""  # why it did not run (its last lines of output)
    load_average: float = 0.0  # the 1-minute load when it started


def run_bench(bench: Bench, *, tree: Path, side: str, quick: bool, python: str, env: dict[str, str]) -> Run:
    """Run ``bench`` from the checkout ``tree`` and read its last line of JSON."""
    args = [python, str(tree / "bench" / f"{bench.name}.py"), *(bench.quick_args if quick else bench.args)]
    run_env = {**os.environ, **bench.env, **(bench.quick_env if quick else {}), **env}
    run_env["PYTHONPATH"] = str(tree)
    # The settings want a Redis even where the bench does not use it (benches with a broker name theirs).
    run_env.setdefault("REDIS_URL", os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    load = os.getloadavg()[0]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            args, cwd=tree, env=run_env, capture_output=True, text=True, timeout=bench.timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return Run(
            bench.name, side, False, time.perf_counter() - started, reason=f"timed out after {bench.timeout_s} s"
        )
    seconds = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    result = None
    if done.returncode == 0 and lines:
        with contextlib.suppress(json.JSONDecodeError):
            result = json.loads(lines[-1])
    if not isinstance(result, dict):
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
        return Run(
            bench.name,
            side,
            False,
            seconds,
            reason=" ".join(tail)[-300:] or f"exit {done.returncode}",
            load_average=load,
        )
    return Run(bench.name, side, True, seconds, result=result, load_average=load)


def rounds(names: Sequence[str], runs: int, sides: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(bench, side) in the order they run: per round every bench on each side, the sides' order
    swapped every round (base, head; head, base; …)."""
    for n in range(runs):
        order = list(sides) if n % 2 == 0 else list(reversed(sides))
        for name in names:
            for side in order:
                yield name, side


@contextlib.contextmanager
def base_tree(commit: str) -> Iterator[tuple[Path, str]]:
    """A temporary worktree of ``commit`` with head's ``bench/`` and this ``.venv``; removed after."""
    resolved = _git("rev-parse", "--verify", f"{commit}^{{commit}}")
    folder = Path(tempfile.mkdtemp(prefix="console-bench-base-"))
    tree = folder / "tree"
    _git("worktree", "add", "--detach", "--quiet", str(tree), resolved)
    try:
        shutil.rmtree(tree / "bench", ignore_errors=True)
        shutil.copytree(ROOT / "bench", tree / "bench", ignore=shutil.ignore_patterns("__pycache__"))
        if (ROOT / ".venv").exists():
            (tree / ".venv").symlink_to((ROOT / ".venv").resolve())
        yield tree, resolved
    finally:
        _git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(folder, ignore_errors=True)


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


# --- The configuration each side ran under ---------------------------------------------------------

#: Settings that change what the benches measure.
SETTINGS = (
    "DATABASES.default.OPTIONS.server_side_binding",
    "DATABASES.default.OPTIONS.prepare_threshold",
    "DATABASE_POOL",
    "WEB_THREADS",
    "CELERY_BROKER_TRANSPORT",
    "CONSOLE_SPEEDUPS",
    "BILLING_SETTLE_BATCH_SIZE",
)

_CONFIG_PROBE = """
import json, os, sys, platform
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("CONSOLE_ENV", "development")
from importlib import metadata
import django
django.setup()
from django.conf import settings
def get(path):
    value = settings
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        else:
            value = getattr(value, part, None)
    try:
        json.dumps(value)
    except TypeError:
        value = repr(value)
    return value
versions = {"python": platform.python_version()}
for name in ("django", "psycopg", "kombu", "celery", "channels", "uvicorn", "asgiref", "redis"):
    try:
        versions[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        versions[name] = None
out = {"settings": {p: get(p) for p in json.loads(sys.argv[1])}, "versions": versions}
try:
    from core import speedups
    out["speedups"] = speedups.report()
except ImportError:
    out["speedups"] = None
print(json.dumps(out))
"""


def configuration(tree: Path, *, python: str, env: dict[str, str]) -> dict:
    """The commit, settings and versions ``tree`` runs the benches under (as its code reads them)."""
    config: dict = {
        "commit": _git("rev-parse", "HEAD", cwd=tree),
        # (bench/ left out: a base runs head's copy of it)
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench", cwd=tree)),
    }
    probe_env = {
        **os.environ,
        **env,
        "PYTHONPATH": str(tree),
        "DATABASE_URL": env.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    }
    probe_env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    done = subprocess.run(
        [python, "-c", _CONFIG_PROBE, json.dumps(SETTINGS)],
        cwd=tree,
        env=probe_env,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        config.update(json.loads(done.stdout.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError):
        config["probe_error"] = (done.stderr.strip().splitlines() or ["no output"])[-1][-300:]
    return config


def servers(admin_url: str, redis_url: str) -> dict:
    """The PostgreSQL and Redis the benches use, and the machine."""
    found: dict = {"machine": platform.machine(), "cpus": os.cpu_count(), "system": platform.platform()}
    try:
        import psycopg

        with psycopg.connect(admin_url, connect_timeout=5) as conn:
            found["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    except Exception as exc:  # recorded, not fatal: a bench that needs it says so itself
        found["postgresql"] = f"unreachable: {exc}"[:200]
    try:
        import redis

        found["redis"] = redis.Redis.from_url(redis_url, socket_timeout=5).info("server")["redis_version"]
    except Exception as exc:  # recorded, not fatal: a bench that needs it says so itself
        found["redis"] = f"unreachable: {exc}"[:200]
    return found


# --- The table ---------------------------------------------------------------------------------------

RED, RESET = "\033[31m", "\033[0m"


def table_rows(benches: Sequence[Bench], runs: Sequence[Run], *, sides: Sequence[str]) -> list[dict]:
    """One row per figure: each side's runs and median, and (with a base) the comparison."""
    rows = []
    for bench in benches:
        mine = [r for r in runs if r.bench == bench.name]
        for side in sides:
            failed = [r for r in mine if r.side == side and not r.ok]
            if failed and not any(r.ok for r in mine if r.side == side):
                rows.append({"bench": bench.name, "figure": None, "skipped": {side: failed[-1].reason}})
        for figure in bench.figures:
            row: dict = {"bench": bench.name, "figure": figure.key, "better": figure.better}
            values: dict[str, list[float]] = {}
            for side in sides:
                values[side] = [
                    v for r in mine if r.side == side and r.ok if (v := figure_value(r.result, figure.key)) is not None
                ]
                row[side] = {"runs": values[side], "median": statistics.median(values[side]) if values[side] else None}
            if "base" in sides:
                found = compare(values["base"], values["head"], figure.better)
                row["ratio"] = round(found.ratio, 3) if found else None
                row["worse_pct"] = round(found.worse_pct, 1) if found else None
                row["flagged"] = bool(found and found.flagged)
            if any(values.values()):
                rows.append(row)
    return rows


def render(rows: Sequence[dict], *, sides: Sequence[str], color: bool = True) -> str:
    """The table as text: a line per figure (skipped benches say why); flagged lines in red."""

    def fmt(value: float | None) -> str:
        if value is None:
            return "—"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"

    def spread(runs: list[float]) -> str:
        return "" if len(runs) < 2 else f" ({fmt(min(runs))}–{fmt(max(runs))})"

    width = max([len(f"{r['bench']} {r['figure']}") for r in rows if r["figure"]] + [30])
    header = f"{'figure':<{width}}  " + "  ".join(f"{side:>22}" for side in sides)
    if "base" in sides:
        header += f"  {'head/base':>9}"
    lines = [header, "-" * len(header)]
    for row in rows:
        if row["figure"] is None:
            for side, reason in row["skipped"].items():
                lines.append(f"{row['bench']:<{width}}  skipped ({side}): {reason}")
            continue
        line = f"{row['bench'] + ' ' + row['figure']:<{width}}  " + "  ".join(
            f"{fmt(row[side]['median']) + spread(row[side]['runs']):>22}" for side in sides
        )
        if "base" in sides:
            ratio = row.get("ratio")
            line += f"  {'—' if ratio is None else f'{ratio:.2f}':>9}"
            if row.get("flagged"):
                line += f"  {row['worse_pct']:+.0f} % worse ({row['better']} is better)"
                line = f"{RED}{line}{RESET}" if color else line
        lines.append(line)
    return "\n".join(lines)


def run_table(
    names: Sequence[str],
    *,
    runs: int = 1,
    quick: bool = False,
    base: str | None = None,
    env: dict[str, str] | None = None,
    benches: dict[str, Bench] | None = None,
    python: str = sys.executable,
    progress: Callable[[str], None] = print,
) -> dict:
    """Run the benches ``names`` (``runs`` rounds; with ``base``, alternating with that commit) and
    return the table: its rows, each run's whole JSON and each side's configuration."""
    registry = benches or BENCHES
    chosen = [registry[name] for name in names]
    env = dict(env or {})
    sides = ("base", "head") if base else ("head",)
    with contextlib.ExitStack() as stack:
        trees = {"head": ROOT}
        if base:
            trees["base"], _ = stack.enter_context(base_tree(base))
        config = {side: configuration(tree, python=python, env=env) for side, tree in trees.items()}
        all_runs: list[Run] = []
        for name, side in rounds(names, runs, sides):
            progress(f"{name} ({side}{', quick' if quick else ''})…")
            done = run_bench(registry[name], tree=trees[side], side=side, quick=quick, python=python, env=env)
            progress(f"  {'done' if done.ok else 'skipped: ' + done.reason} in {done.seconds:.0f} s")
            all_runs.append(done)
    rows = table_rows(chosen, all_runs, sides=sides)
    return {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "rounds": runs,
        "sides": list(sides),
        "configuration": config,
        "servers": servers(
            env.get("BENCH_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
            env.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
        ),
        "rows": rows,
        "runs": [vars(r) for r in all_runs],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated bench names (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer iterations and less data: a sanity check")
    parser.add_argument("--base", default="", help="a commit to compare with (alternating runs, ratios)")
    parser.add_argument("--runs", type=int, default=0, help="rounds (default 1, or 3 with --base)")
    parser.add_argument("--out", default="", help="where the JSON goes (default var/bench/<time>.json)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown bench {', '.join(unknown)}: choose among {', '.join(BENCHES)}")
    runs = args.runs or (3 if args.base else 1)
    table = run_table(names, runs=runs, quick=args.quick, base=args.base or None, env={})
    out = Path(args.out) if args.out else ROOT / "var" / "bench" / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=2) + "\n")
    sides = table["sides"]
    print()
    for side in sides:
        c = table["configuration"][side]
        versions = c.get("versions") or {}
        print(
            f"{side}: {c['commit'][:12]}{' (uncommitted changes)' if c.get('dirty') else ''}; Python {versions.get('python')}, "
            f"Django {versions.get('django')}; settings {json.dumps(c.get('settings'))}"
        )
    s = table["servers"]
    print(
        f"PostgreSQL {s.get('postgresql')}, Redis {s.get('redis')}, {s.get('cpus')} CPUs; {runs} round(s){', quick' if args.quick else ''}"
    )
    print(render(table["rows"], sides=sides, color=sys.stdout.isatty() or bool(os.environ.get("FORCE_COLOR"))))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
