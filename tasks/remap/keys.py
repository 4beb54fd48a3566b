"""Rows matched by key, in Arrow and NumPy: the remap's joins, groups and repeat checks.

A key is one or more columns; two rows have the same key when every column holds equal
values (a null equals a null, as pandas merges). Each column is hashed once
(`dictionary_encode`) and the columns' codes are combined into one integer per row, so a
join is a lookup in an array and costs the same few calls for 16 rows as for millions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.errors import IntegrityError

__all__ = ["first_rows", "places", "row_codes", "rows_in", "sort_order", "taken"]

Column: TypeAlias = pa.Array | pa.ChunkedArray


def _encoded(values: Column) -> tuple[np.ndarray, pa.Array]:
    """Codes 0, 1, ... of a column's distinct values, in order of first appearance, and the
    values (a null among them if there is one)."""
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    if isinstance(encoded, pa.ChunkedArray):  # the chunks share one dictionary
        chunks = [chunk.indices for chunk in encoded.chunks]
        indices = pa.chunked_array(chunks, pa.int32()).to_numpy()
        distinct = encoded.chunk(0).dictionary if encoded.num_chunks else pa.array([])
    else:
        indices, distinct = encoded.indices.to_numpy(), encoded.dictionary
    return indices.astype(np.int64, copy=False), distinct


def _dense(values: Column) -> np.ndarray:
    return _encoded(values)[0]


def row_codes(columns: Sequence[Column]) -> np.ndarray:
    """Per row, the code of its key: equal codes for equal keys, numbered 0, 1, ... in order
    of first appearance."""
    codes = _dense(columns[0])
    for column in columns[1:]:
        more = _dense(column)
        codes = _dense(pa.array(codes * (int(more.max(initial=-1)) + 1) + more))
    return codes


def sort_order(columns: Sequence[Column]) -> np.ndarray:
    """The rows in order of the key columns (ascending, the first column first, nulls last),
    rows with equal keys in their own order: `pc.sort_indices`' order, by ranks. Each
    column's distinct values are sorted once; the rows are then sorted by one integer."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        codes, distinct = _encoded(column)
        rank = places(pc.sort_indices(distinct).to_numpy())
        if len(key) and int(key.max()) >= (1 << 62) // max(len(distinct), 1):
            key = np.unique(key, return_inverse=True)[1].astype(np.int64)  # same order
        key = key * len(distinct) + rank[codes]
    return np.argsort(key, kind="stable")


def places(order: np.ndarray) -> np.ndarray:
    """Each row's place in `order` (a permutation of the rows): its inverse."""
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    return place


def first_rows(codes: np.ndarray) -> np.ndarray:
    """The first row of each code of `row_codes` (codes appear in increasing order)."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    seen = np.maximum.accumulate(codes)
    return np.flatnonzero(np.r_[True, seen[1:] > seen[:-1]])


def rows_in(
    left: Sequence[Column], right: Sequence[Column], *, repeats: str | None = None
) -> np.ndarray:
    """For each row of the `left` key columns, the first row of the `right` ones with the
    same key, or -1 where there is none (a left join's right row). With `repeats`, right
    rows repeating a key are an IntegrityError saying `repeats`."""
    both = [
        pa.chunked_array([*_chunks(theirs), *_chunks(ours.cast(theirs.type))], theirs.type)
        for ours, theirs in zip(left, right, strict=True)
    ]
    codes = row_codes(both)
    n = len(right[0])
    first = first_rows(codes[:n])
    if repeats is not None and len(first) < n:
        raise IntegrityError(repeats)
    found = codes[n:] < len(first)
    return np.where(found, first[np.where(found, codes[n:], 0)] if n else 0, -1)


def taken(column: pa.ChunkedArray, rows: np.ndarray) -> pa.ChunkedArray:
    """`column` at `rows` (of `rows_in`), null where a row is -1."""
    return column.take(pa.array(rows, mask=rows < 0))


def _chunks(column: Column) -> list[pa.Array]:
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]
