"""CSV files people open in a spreadsheet: every cell that would start a formula is neutralised.

Excel, LibreOffice and Google Sheets read a cell starting with ``=``, ``+``, ``-`` or ``@`` (and, after
a tab or a carriage return they strip, any of those) as a formula, so free text a user typed, an
instance's name or a member's display name, could run ``=HYPERLINK(…)`` or a DDE command on the machine
of whoever opens the export (OWASP's "CSV injection"). Such a cell gets a leading ``'``, which the
spreadsheet shows as text. A plain number (a negative amount, ``-1.90``) is left alone: it is no formula,
and a quote would turn it into text. Every CSV the console writes goes through ``csv_writer``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def csv_cell(value: Any) -> Any:
    """``value``, with a ``'`` in front when it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


class SafeWriter:
    """``csv.writer``'s ``writerow`` and ``writerows``, each cell through ``csv_cell``."""

    def __init__(self, stream, **options: Any) -> None:
        self._writer = csv.writer(stream, **options)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([csv_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(stream, **options: Any) -> SafeWriter:
    """A CSV writer onto ``stream`` (a file, an ``HttpResponse``) whose cells never start a formula."""
    return SafeWriter(stream, **options)
