"""A fixed-shape statement for the read of every launch whose ORM compilation costs most.

Django compiles a queryset into SQL on every evaluation: for the instance a worker boots, read at every
boot, that compilation costs several times the round trip to
PostgreSQL. Those statements are written once as SQL in their selectors; what they read still
becomes model instances, with the model's own columns (taken from its ``_meta``, so a new field is
read without touching the statement) and its fields' conversions from the database (a ``JSONField``'s
text becomes its value), as the ORM would make them.

Only statements that save at least 5 % of a launch's CPU earn a place (``bench/sql_gain.py`` measures
each against its ORM twin): the worker's instance read (10 to 15 %). The others it once held (the API
token look-up, 3.7–4.9 % on 2026-12-04; status moves, event, instance and meter inserts, the budget and
reservation checks, volume mounts, the simulated cloud's reads: 1 to 4 % each) went back to the ORM. ``.importlinter`` names the modules allowed to import this one.

It only reads: ``fetch_one`` refuses anything but a ``SELECT``, so nothing here writes around the
ORM's guards (the ledger's append-only tables, ``core.appendonly``). It builds models from rows with
parts of the ORM that are not public API (``Field.get_col``, the converters): where the speed-up is
off, or Django is outside the versions it was checked on (``core.speedups``), ``enabled()`` is false
and each caller runs its ORM query instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, connections, models

from core import speedups


def enabled() -> bool:
    """Whether the fixed statements are used in this process; where not (``CONSOLE_SPEEDUP_SQL=0``, or a
    Django outside the versions this module was checked on: ``core.speedups``), callers use the ORM."""
    return speedups.enabled("sql")


_SELECT = re.compile(r"\s*SELECT\b", re.IGNORECASE)

_layouts: dict[tuple[type[models.Model], str], tuple[str, tuple]] = {}


def _layout(model: type[models.Model], alias: str) -> tuple[str, tuple]:
    """``model``'s concrete columns as a select list on table ``alias``, and the conversions its fields
    ask for, by position (once per process)."""
    key = (model, alias)
    layout = _layouts.get(key)
    if layout is None:
        connection = connections[DEFAULT_DB_ALIAS]
        quote = connection.ops.quote_name
        fields = model._meta.concrete_fields
        select = ", ".join(f"{quote(alias)}.{quote(field.column)}" for field in fields)
        converters = []
        for position, field in enumerate(fields):
            column = field.get_col(alias)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                converters.append((position, tuple(found), column))
        layout = _layouts[key] = (select, tuple(converters))
    return layout


def columns(model: type[models.Model], alias: str) -> str:
    """The select list of every concrete column of ``model``, on the table named ``alias`` in the FROM."""
    return _layout(model, alias)[0]


def table(model: type[models.Model]) -> str:
    """``model``'s table, quoted for the FROM."""
    return connections[DEFAULT_DB_ALIAS].ops.quote_name(model._meta.db_table)


def ordering(model: type[models.Model], alias: str) -> str:
    """``model``'s ``Meta.ordering`` as an ORDER BY list on table ``alias`` (plain field names only)."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    terms = []
    for name in model._meta.ordering:
        field = model._meta.get_field(name.lstrip("-"))
        terms.append(f"{quote(alias)}.{quote(field.column)}{' DESC' if name.startswith('-') else ''}")
    return ", ".join(terms)


def width(model: type[models.Model]) -> int:
    """How many values ``columns(model, …)`` selects."""
    return len(model._meta.concrete_fields)


def from_row[M: models.Model](model: type[M], values: Sequence, *, alias: str = "", using: str = DEFAULT_DB_ALIAS) -> M:
    """An instance of ``model`` from the values ``columns(model, alias)`` selected, converted as the ORM
    converts them (``Model.from_db``: it is not new, and it remembers its database)."""
    converters = _layout(model, alias or model._meta.db_table)[1]
    if converters:
        values = list(values)
        connection = connections[using]
        for position, found, column in converters:
            value = values[position]
            for converter in found:
                value = converter(value, column, connection)
            values[position] = value
    return model.from_db(using, None, values)


def from_joined_row(row: Sequence, *layout: tuple[type[models.Model], str]) -> list:
    """One instance per ``(model, alias)`` of ``layout`` from a row that selected ``columns(model, alias)``
    for each, in that order; None for a model whose primary key is NULL (a LEFT JOIN that found no
    row). Whatever the row selected after them is the caller's (``row[-1]``, say)."""
    found, start = [], 0
    for model, alias in layout:
        values = row[start : start + width(model)]
        pk_position = model._meta.concrete_fields.index(model._meta.pk)
        found.append(None if values[pk_position] is None else from_row(model, values, alias=alias))
        start += width(model)
    return found


def fetch_one(sql: str, params: Sequence = (), *, using: str = DEFAULT_DB_ALIAS) -> tuple | None:
    """The first row of the query ``sql`` (or None), through Django's connection (its transaction, its
    errors). Only a ``SELECT``: writes go through the ORM, and its guards (see the module docstring)."""
    if not _SELECT.match(sql):
        raise ValueError("core.sql only reads: write through the ORM")
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()
