"""Run a command while every core is kept busy, to find the tests that measure time instead of waiting.

    python scripts/under_load.py [--workers N] [--max-seconds S] -- make test

A test that passes on an idle machine and fails here asserts that something happens within a
wall-clock time where it should wait for the event (see `make test-under-load` and issue "A suite
that passes on a busy machine"). The load is bounded: the spinners stop when the command ends, when
`--max-seconds` have passed (default two hours), or when this script is interrupted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import time


def _spin(deadline: float) -> None:
    """Burn one core until the deadline; the parent kills us sooner when its command ends."""
    x = 0
    while time.monotonic() < deadline:
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="busy processes (default: one a core)")
    parser.add_argument("--max-seconds", type=float, default=7200, help="stop the load after this long")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name a command after --")

    deadline = time.monotonic() + args.max_seconds
    spinners = [multiprocessing.Process(target=_spin, args=(deadline,), daemon=True) for _ in range(args.workers)]
    for spinner in spinners:
        spinner.start()
    print(
        f"under_load: {args.workers} busy processes for at most {args.max_seconds:.0f} s", file=sys.stderr, flush=True
    )
    started = time.monotonic()
    child = subprocess.Popen(command)  # noqa: S603 - the operator's own command line
    try:
        rc = child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        rc = child.wait()
    finally:
        for spinner in spinners:
            spinner.terminate()
        for spinner in spinners:
            spinner.join(5)
    print(f"under_load: the command exited {rc} after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
