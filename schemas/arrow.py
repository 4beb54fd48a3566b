"""Arrow schemas derived from the pydantic row models, so each table has one definition."""

from __future__ import annotations

import datetime as dt
import functools
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel

_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    bytes: pa.binary(),
    dt.datetime: pa.timestamp("us", tz="UTC"),
    dt.date: pa.date32(),
}


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """Map one field annotation to (arrow type, nullable)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        inner, _ = _arrow_type(args[0])
        return inner, True
    if origin is Literal:
        values = typing.get_args(annotation)
        kinds = {type(v) for v in values}
        if len(kinds) != 1:
            raise TypeError(f"mixed literal {annotation!r}")
        return _SCALARS[kinds.pop()], False
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    raise TypeError(f"no arrow type for {annotation!r}")


ADDED_LATER_KEY = "added_later"
ADDED_LATER: dict[str, Any] = {ADDED_LATER_KEY: True}
"""`Field(default=None, json_schema_extra=ADDED_LATER)`: a nullable column that tables written
before it existed lack; `conform` reads them with the column null."""


@functools.cache
def arrow_schema(model: type[BaseModel], *, added: bool = True) -> pa.Schema:
    """The Arrow schema of a row model: one column per field, in declaration order
    (`added=False`: without the `ADDED_LATER` columns, for writers that append them).
    Made once per model (resolving its type hints costs ~0.3 ms); a schema is immutable."""
    hints = typing.get_type_hints(model)
    fields = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        if not added and isinstance(extra, dict) and extra.get(ADDED_LATER_KEY):
            continue
        arrow_type, nullable = _arrow_type(hints[name])
        fields.append(pa.field(name, arrow_type, nullable=nullable))
    return pa.schema(fields, metadata={"judgeline.table": model.__name__})


def column_names(model: type[BaseModel]) -> list[str]:
    """The table's column names in order."""
    return list(model.model_fields)


def rows_to_table(rows: Iterable[BaseModel | dict[str, Any]], model: type[BaseModel]) -> pa.Table:
    """Build a table of `model` rows; dict rows are validated through the model first."""
    names = column_names(model)
    columns: dict[str, list[Any]] = {n: [] for n in names}
    for row in rows:
        item = row if isinstance(row, model) else model.model_validate(row)
        for n in names:
            columns[n].append(getattr(item, n))
    return pa.Table.from_pydict(columns, schema=arrow_schema(model))


def conform(table: pa.Table, model: type[BaseModel], *, where: str) -> pa.Table:
    """Check a table has exactly the model's columns and cast it to the model's schema.

    A missing column declared with `ADDED_LATER` (nullable, default None: a column added
    after older tables were written) is filled with nulls. `where` names the file or stage
    for the error message.
    """
    schema = arrow_schema(model)
    have = list(table.column_names)
    want = [f.name for f in schema]
    extra = [c for c in have if c not in want]
    for name in [c for c in want if c not in have and _added_later(model, schema, c)]:
        table = table.append_column(name, pa.nulls(table.num_rows, schema.field(name).type))
        have.append(name)
    missing = [c for c in want if c not in have]
    if extra or missing:
        parts = []
        if missing:
            parts.append(f"missing columns {missing}")
        if extra:
            parts.append(f"unexpected columns {extra}")
        raise ValueError(f"{where}: not a {model.__name__} table: {'; '.join(parts)}")
    table = table.select(want)
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"{where}: columns do not have {model.__name__} types: {exc}") from exc


def _added_later(model: type[BaseModel], schema: pa.Schema, name: str) -> bool:
    """Whether a column may be absent from older tables (see `ADDED_LATER`)."""
    field = model.model_fields[name]
    extra = field.json_schema_extra
    marked = isinstance(extra, dict) and bool(extra.get(ADDED_LATER_KEY))
    return marked and schema.field(name).nullable and field.default is None


def table_rows(table: pa.Table, model: type[BaseModel]) -> Sequence[BaseModel]:
    """Validate every row of a table into the model (for small tables and tests)."""
    return [model.model_validate(r) for r in table.to_pylist()]
