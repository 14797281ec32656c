"""Fixed-shape statements for the few reads every launch runs, without compiling a query each time.

Django compiles a queryset into SQL on every evaluation: for the reads of a launch's hot path (the API
token, the instance a worker boots) that compilation costs several times the round trip to
PostgreSQL (about 0.5 ms of CPU against 0.1 ms for the statement). The handful of statements run
on every launch are written once as SQL here and in their selectors; what they read still becomes
model instances, with the model's own columns (taken from its ``_meta``, so a new field is read
without touching the statement) and its fields' conversions from the database (a ``JSONField``'s text
becomes its value), as the ORM would make them.

Use it only where a benchmark shows the compilation matters (``bench/launch.py``); everywhere else the
ORM's readability wins.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, connections, models

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
    """The first row of ``sql`` (or None), through Django's connection (its transaction, its errors)."""
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def fetch_all(sql: str, params: Sequence = (), *, using: str = DEFAULT_DB_ALIAS) -> list[tuple]:
    """Every row of ``sql``, through Django's connection."""
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


#: Above this many rows ``insert_many`` leaves the statement to ``bulk_create``.
MAX_FIXED_ROWS = 16

_inserts: dict[tuple[type[models.Model], int, bool], tuple[str, tuple]] = {}


def _insert_layout(model: type[models.Model], rows: int, ignore_conflicts: bool, connection) -> tuple[str, tuple]:
    layout = _inserts.get((model, rows, ignore_conflicts))
    if layout is None:
        quote = connection.ops.quote_name
        meta = model._meta
        fields = tuple(f for f in meta.concrete_fields if f is not meta.auto_field)
        row = f"({', '.join(['%s'] * len(fields))})"
        statement = (
            f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "  # noqa: S608
            f"VALUES {', '.join([row] * rows)}{' ON CONFLICT DO NOTHING' if ignore_conflicts else ''} "
            f"RETURNING {quote(meta.pk.column)}"
        )
        layout = _inserts[(model, rows, ignore_conflicts)] = (statement, fields)
    return layout


def insert(obj: models.Model, *, ignore_conflicts: bool = False, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Insert ``obj`` as ``obj.save()`` would on a new row (defaults, ``pre_save``, the database's own
    preparation of each value), in a statement written once per model; its new primary key is set on it.

    ``ignore_conflicts``: ``ON CONFLICT DO NOTHING`` (a unique index says the row is there already):
    returns False and leaves ``obj`` unsaved then. No signals are sent, as with ``bulk_create``.
    """
    return insert_many([obj], ignore_conflicts=ignore_conflicts, using=using) == 1


def insert_many(objs: Sequence[models.Model], *, ignore_conflicts: bool = False, using: str = DEFAULT_DB_ALIAS) -> int:
    """``insert`` for several rows of one model in one statement; returns how many were inserted (each
    inserted object gets its primary key when nothing conflicted)."""
    if not objs:
        return 0
    model = type(objs[0])
    if len(objs) > MAX_FIXED_ROWS:  # a statement per row count: only for the few rows of the hot path
        if ignore_conflicts:
            return sum(
                insert_many(objs[i : i + MAX_FIXED_ROWS], ignore_conflicts=True, using=using)
                for i in range(0, len(objs), MAX_FIXED_ROWS)
            )
        return len(model._default_manager.db_manager(using).bulk_create(objs))
    connection = connections[using]
    statement, fields = _insert_layout(model, len(objs), ignore_conflicts, connection)
    values = [field.get_db_prep_save(field.pre_save(obj, True), connection) for obj in objs for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(statement, values)
        keys = [row[0] for row in cursor.fetchall()]
    if len(keys) == len(objs):  # (with conflicts skipped, which key is whose is not known)
        for obj, key in zip(objs, keys, strict=True):
            setattr(obj, model._meta.pk.attname, key)
            obj._state.adding, obj._state.db = False, using
    return len(keys)


_updates: dict[tuple, tuple[str, tuple, tuple]] = {}


def update(
    model: type[models.Model], *, where: dict[str, object], values: dict[str, object], using: str = DEFAULT_DB_ALIAS
) -> int:
    """``model.objects.filter(**where).update(**values)`` for plain equalities and plain values (no
    expressions), in a statement written once per model and set of names; returns the rows changed."""
    connection = connections[using]
    key = (model, tuple(where), tuple(values))
    layout = _updates.get(key)
    if layout is None:
        quote = connection.ops.quote_name
        meta = model._meta
        where_fields = tuple(meta.pk if name == "pk" else meta.get_field(name) for name in where)
        set_fields = tuple(meta.get_field(name) for name in values)
        statement = (
            f"UPDATE {quote(meta.db_table)} SET "  # noqa: S608 (names from _meta)
            f"{', '.join(f'{quote(f.column)} = %s' for f in set_fields)} "
            f"WHERE {' AND '.join(f'{quote(f.column)} = %s' for f in where_fields)}"
        )
        layout = _updates[key] = (statement, set_fields, where_fields)
    statement, set_fields, where_fields = layout
    params = [
        field.get_db_prep_save(_key_of(field, value), connection)
        for field, value in zip(set_fields, values.values(), strict=True)
    ]
    for field, value in zip(where_fields, where.values(), strict=True):
        if value is None:
            raise ValueError(f"{field.name} = NULL matches nothing: ask for IS NULL through the ORM")
        params.append(field.get_db_prep_value(_key_of(field, value), connection, prepared=False))
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def _key_of(field, value):
    """A related object given for a foreign key stands for its primary key, as in the ORM."""
    return value.pk if field.remote_field is not None and isinstance(value, models.Model) else value


def is_plain(value: object) -> bool:
    """Whether ``value`` is a value, not an expression the database computes (``F``, ``Least``…)."""
    return not hasattr(value, "resolve_expression")
