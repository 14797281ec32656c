"""`make bench`'s table (bench/run.py): how runs compare with a base, and the machinery end to end.

Nothing here depends on how fast anything runs: the comparisons take fixed numbers, and the quick run
of a real bench checks that its figures and configuration arrive in the table, not what they are.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from bench import run as bench_run
from bench.run import HIGHER, LOWER, RED, Bench, Figure, compare, figure_value, render, rounds, run_table, table_rows


def test_a_figure_much_worse_beyond_the_spread_of_its_runs_is_flagged():
    found = compare([1.00, 1.05, 0.95], [1.30, 1.35, 1.40], LOWER)
    assert found.flagged and found.ratio == pytest.approx(1.35) and found.worse_pct == pytest.approx(35)


def test_a_worse_median_inside_the_spread_of_the_runs_is_not_flagged():
    # head's median is 30 % worse, but one head run beats a base run: noise, not a regression
    assert not compare([1.00, 1.05, 0.95], [1.30, 0.99, 1.40], LOWER).flagged


def test_a_figure_worse_by_less_than_a_fifth_is_not_flagged_however_steady():
    found = compare([1.00, 1.00, 1.00], [1.15, 1.15, 1.15], LOWER)
    assert not found.flagged and found.worse_pct == pytest.approx(15)


def test_for_a_rate_fewer_is_worse():
    found = compare([100, 102, 98], [70, 72, 71], HIGHER)
    assert found.flagged and found.ratio == pytest.approx(0.71)
    assert found.worse_pct == pytest.approx((100 / 71 - 1) * 100)
    assert not compare([100, 102, 98], [140, 150, 145], HIGHER).flagged  # better


def test_one_run_each_is_judged_by_the_threshold_alone():
    assert compare([1.0], [1.21], LOWER).flagged
    assert not compare([1.0], [1.19], LOWER).flagged


def test_a_side_without_runs_compares_to_nothing_and_a_zero_base_does_not_divide():
    assert compare([], [1.0], LOWER) is None
    assert not compare([0, 0], [0, 0], LOWER).flagged
    assert compare([0, 0], [3, 4], LOWER).flagged


def test_figures_are_read_from_nested_objects_and_only_numbers_count():
    result = {"a_ms": 3, "throughput": {"gateway": 12.5}, "ok": True, "name": "x"}
    assert figure_value(result, "a_ms") == 3.0
    assert figure_value(result, "throughput.gateway") == 12.5
    assert figure_value(result, "ok") is None and figure_value(result, "name") is None
    assert figure_value(result, "throughput.direct") is None


def test_the_sides_alternate_their_order_every_round():
    assert list(rounds(["a", "b"], 2, ("base", "head"))) == [
        ("a", "base"),
        ("a", "head"),
        ("b", "base"),
        ("b", "head"),
        ("a", "head"),
        ("a", "base"),
        ("b", "head"),
        ("b", "base"),
    ]


def _run(bench: str, side: str, result: dict | None, reason: str = "") -> bench_run.Run:
    return bench_run.Run(bench, side, result is not None, 1.0, result=result or {}, reason=reason)


def test_the_table_puts_a_regression_in_red_and_says_why_a_bench_was_skipped():
    benches = [Bench("tick", (Figure("s"), Figure("per_s", HIGHER))), Bench("ssh", (Figure("ms"),))]
    runs = [
        *(_run("tick", "base", {"s": s, "per_s": 10}) for s in (1.0, 1.1)),
        *(_run("tick", "head", {"s": s, "per_s": 10}) for s in (2.0, 2.2)),
        _run("ssh", "base", None, "sshd is not installed (make local-deps)"),
        _run("ssh", "head", None, "sshd is not installed (make local-deps)"),
    ]
    rows = table_rows(benches, runs, sides=("base", "head"))
    tick_s = next(r for r in rows if r["figure"] == "s")
    assert tick_s["flagged"] and tick_s["ratio"] == pytest.approx(2.1 / 1.05, rel=1e-3)
    assert tick_s["head"] == {"runs": [2.0, 2.2], "median": pytest.approx(2.1)}
    assert not next(r for r in rows if r["figure"] == "per_s")["flagged"]
    text = render(rows, sides=("base", "head"))
    red = [line for line in text.splitlines() if RED in line]
    assert len(red) == 1 and "tick s" in red[0] and "% worse" in red[0]
    assert "skipped (head): sshd is not installed" in text
    assert RED not in render(rows, sides=("base", "head"), color=False)


def test_a_quick_table_runs_a_real_bench_and_records_its_configuration():
    db = settings.DATABASES["default"]  # the bench makes, and drops, a database of its own beside it
    login = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    url = f"postgres://{login}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}_benchtable"
    missing = Bench("missing", (Figure("x"),))  # no bench/missing.py: reported as skipped, not an error
    table = run_table(
        ["metering", "missing"],
        quick=True,
        env={"DATABASE_URL": url},
        benches={**bench_run.BENCHES, "missing": missing},
        progress=lambda _: None,
    )
    rows = {(r["bench"], r["figure"]): r for r in table["rows"]}
    assert rows[("metering", "queries_per_tick")]["head"]["runs"] == [7.0]  # a constant number of statements per tick
    assert rows[("metering", "tick_s_median")]["head"]["median"] > 0
    assert "can't open file" in rows[("missing", None)]["skipped"]["head"]
    head = table["configuration"]["head"]
    assert len(head["commit"]) == 40 and head["versions"]["django"] and head["versions"]["python"]
    assert head["settings"]["DATABASES.default.OPTIONS.server_side_binding"] in {True, False}
    assert table["servers"]["postgresql"][0].isdigit()
    assert json.loads(json.dumps(table)) == table  # what is written to var/bench/ is plain JSON


def test_the_sql_gain_bench_names_statements_that_exist():
    """sql_gain counts calls by their function's dotted name: a module moved (instances.services became
    a package) left it measuring nothing, and `make bench` listed it as skipped."""
    import importlib

    from bench import sql_gain

    for dotted in sql_gain.LABELS:
        module, _, function = dotted.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function, None)), dotted
