"""Tables a person reads in a terminal, and the same data as JSON for scripts.

A table is printed as it is where it fits the terminal. Where it does not (many columns at
80), it is turned: one line per column, one column per row (judge configs are few), in as
many side-by-side chunks of rows as fit; where not even one row fits, each row is a block
with one `column: value` line each. A cell is never cut to `…` (numbers, run ids and
commands are copied from it), and a row is never one run-on line of `key value; ...`. The
title is a line of its own at the terminal's width, broken only between words: under a
narrow table's width it broke ids (a plan id) in two.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["fits", "jsonable", "print_json", "print_table"]


def fits(console: Console, table: Table) -> bool:
    """Whether a table fits the terminal at its natural width (a narrower one would cut
    its cells to `…`)."""
    wide = console.options.update_width(10_000)
    return console.measure(table, options=wide).maximum <= console.width


def _table(caption: str | None, pad_edge: bool = True) -> Table:
    return Table(caption=caption, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=pad_edge)


def _turned(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """`rows` as columns (headed by each row's first cell, `a · b` on two lines), one line
    per header after the first."""
    table = _table(None)
    table.add_column("", no_wrap=True, style="bold")
    for row in rows:
        table.add_column(escape(row[0]).replace(" · ", "\n"), justify="right", no_wrap=True)
    for i, header in enumerate(headers[1:], start=1):
        table.add_row(escape(header), *(escape(row[i]) for row in rows))
    return table


def _rows_side_by_side(
    console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> int:
    """How many rows fit side by side in a turned table (0: not even one)."""
    for n in range(len(rows), 0, -1):
        if fits(console, _turned(headers, rows[:n])):
            return n
    return 0


def print_table(
    console: Console,
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    caption: str | None = None,
    *,
    left: int = 1,
    turn: bool = True,
) -> None:
    """Print `rows` (text cells, the first naming the row) under `headers`: a table where it
    fits, else turned (`turn`; for few rows, such as judge configs), else a block per row.
    The first `left` columns are left-aligned."""
    table = _table(caption, pad_edge=False)
    for i, header in enumerate(headers):
        table.add_column(header, no_wrap=True, justify="left" if i < left else "right")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    if title:
        console.print(escape(title), style="bold", highlight=False)
    if fits(console, table):
        console.print(table)
        return
    per = _rows_side_by_side(console, headers, rows) if turn else 0
    if per:
        for start in range(0, len(rows), per):
            console.print(_turned(headers, rows[start : start + per]))
        if caption:  # a paragraph of the terminal's width, not squeezed under a narrow table
            console.print(escape(caption), style="italic", highlight=False)
        return
    for row in rows:
        console.print(escape(row[0]), style="bold", highlight=False, soft_wrap=True)
        for header, cell in zip(headers[1:], row[1:], strict=True):
            console.print(f"  {escape(header)}: {escape(cell)}", highlight=False)
    if caption:
        console.print(escape(caption), style="italic", highlight=False)


def jsonable(value: Any) -> Any:
    """`value` with NaN and infinities as null, dates as ISO text, tuples as lists, numpy
    scalars as numbers: what `json.dumps` writes as strict JSON."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, str | bytes):
        try:
            value = value.item()  # a numpy or pandas scalar
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def print_json(data: Any) -> None:
    """`data` as strict JSON on stdout, unwrapped (for scripts: `--json`)."""
    sys.stdout.write(json.dumps(jsonable(data), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
