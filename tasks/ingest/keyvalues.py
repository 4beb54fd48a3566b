"""A table's key column in its own words: `key=label{A>B:A,B>A:B,tie:none}` maps each
value of the `label` column to a key (`A`, `B`, or none).

Entries are `value:key`, separated by `,` or `;`; the last `:` of an entry separates them,
so a value may hold `:` but not `,`, `;`, `{` or `}`. A number in a JSON-lines or parquet
column matches its text (`key=winner{0:A,1:B}`). An empty or null cell has no key; any
other value the mapping does not list is an error naming the row.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from schemas.vocabulary import Identity
from tasks.errors import InputError
from tasks.ingest.fields import shorten

__all__ = ["KeyValues", "map_key_value", "parse_key_column", "split_mapping"]

KeyValues = tuple[tuple[str, Identity | None], ...]
"""(column value, key) pairs, in the order given."""

_KEYS: dict[str, Identity | None] = {"A": "A", "B": "B", "none": None, "": None}
_COLUMN_WITH_VALUES = re.compile(r"^(?P<column>[^{}]*)\{(?P<values>[^{}]*)\}$")


def split_mapping(spec: str) -> list[str]:
    """The `field=column` items of a mapping: split at commas outside `{...}`."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(spec):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
    if depth != 0:
        raise InputError(f"column mapping {spec!r}: unclosed or unopened `{{...}}`")
    items.append(spec[start:])
    return items


def parse_key_column(spec: str, field: str, column: str) -> tuple[str, KeyValues]:
    """A mapped column and its value mapping (empty without `{...}`)."""
    if "{" not in column and "}" not in column:
        return column, ()
    if field != "key":
        raise InputError(f"column mapping {spec!r}: only key takes a value mapping, not {field!r}")
    match = _COLUMN_WITH_VALUES.match(column)
    if match is None or not match["column"].strip():
        raise InputError(f"column mapping {spec!r}: write key=COLUMN{{value:A,value:B}}")
    values: dict[str, Identity | None] = {}
    for entry in re.split(r"[,;]", match["values"]):
        if not entry.strip():
            continue
        value, colon, key = (s.strip() for s in entry.rpartition(":"))
        if not colon:
            problem = f"{entry.strip()!r} is not value:A or value:B"
            raise InputError(f"column mapping {spec!r}: {problem}")
        if key not in _KEYS:
            raise InputError(
                f"column mapping {spec!r}: maps {value!r} to {key!r}; a key is A, B or none"
            )
        if value in values:
            raise InputError(f"column mapping {spec!r}: value {value!r} twice")
        values[value] = _KEYS[key]
    if not values:
        raise InputError(f"column mapping {spec!r}: the key's value mapping is empty")
    return match["column"].strip(), tuple(values.items())


def map_key_value(
    cell: Any, values: KeyValues, *, column: str, file: Path, row: int
) -> Identity | None:
    """A key cell through its value mapping; empty or null cells have no key."""
    if cell is None or cell == "":
        return None
    text = str(cell) if isinstance(cell, str | int) and not isinstance(cell, bool) else None
    for value, key in values:
        if text == value:
            return key
    listed = ", ".join(repr(v) for v, _ in values)
    raise InputError(
        f"key (column {column!r}) value {shorten(cell)} is not in its value mapping "
        f"(listed: {listed})",
        file=str(file),
        row=row,
    )
