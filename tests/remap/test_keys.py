"""Rows matched by key in Arrow (the remap's joins, groups and sorts), against plain Python."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tasks.errors import IntegrityError
from tasks.remap.keys import first_rows, places, row_codes, rows_in, sort_order, taken


def random_columns(rng: random.Random, n: int) -> list[pa.ChunkedArray]:
    """Three key columns (text, integers, text) with repeats and nulls, in two chunks."""
    text = [rng.choice(["a", "b", "ab", "B", "é", "", None]) for _ in range(n)]
    ints = [rng.choice([0, 1, 2, 10, -3, None]) for _ in range(n)]
    more = [rng.choice(["x", "y", None]) for _ in range(n)]
    half = n // 2
    return [
        pa.chunked_array([values[:half], values[half:]], kind)
        for values, kind in ((text, pa.string()), (ints, pa.int64()), (more, pa.string()))
    ]


def keys_of(columns: list[pa.ChunkedArray]) -> list[tuple[object, ...]]:
    return list(zip(*(c.to_pylist() for c in columns), strict=True))


@pytest.mark.parametrize("seed", range(5))
def test_row_codes_number_keys_by_first_appearance(seed: int) -> None:
    columns = random_columns(random.Random(seed), 300)
    keys = keys_of(columns)
    codes = row_codes(columns)
    numbered: dict[tuple[object, ...], int] = {}
    assert codes.tolist() == [numbered.setdefault(k, len(numbered)) for k in keys]
    assert first_rows(codes).tolist() == [keys.index(k) for k in numbered]


@pytest.mark.parametrize("seed", range(5))
def test_rows_in_is_the_first_equal_row_nulls_included(seed: int) -> None:
    rng = random.Random(seed)
    left, right = random_columns(rng, 200), random_columns(rng, 50)
    found = rows_in(left, right)
    right_keys = keys_of(right)
    first = {k: i for i, k in reversed(list(enumerate(right_keys)))}
    assert found.tolist() == [first.get(k, -1) for k in keys_of(left)]
    assert taken(right[0], found).to_pylist() == [
        right_keys[i][0] if i >= 0 else None for i in found.tolist()
    ]


def test_rows_in_refuses_repeated_right_keys_when_asked() -> None:
    right = [pa.chunked_array([["p1", "p2", "p1"]])]
    left = [pa.chunked_array([["p2", "p3"]])]
    assert rows_in(left, right).tolist() == [1, -1]
    with pytest.raises(IntegrityError, match="the manifest repeats a pair_id"):
        rows_in(left, right, repeats="the manifest repeats a pair_id")


def test_rows_in_matches_across_string_types() -> None:
    left = [pa.chunked_array([pa.array(["b", "c"], pa.large_string())])]
    right = [pa.chunked_array([pa.array(["a", "b"], pa.string())])]
    assert rows_in(left, right).tolist() == [1, -1]


@pytest.mark.parametrize("seed", range(5))
def test_sort_order_is_arrows_stable_sort(seed: int) -> None:
    columns = random_columns(random.Random(seed), 400)
    table = pa.table({f"c{i}": c for i, c in enumerate(columns)})
    want = pc.sort_indices(table, sort_keys=[(name, "ascending") for name in table.column_names])
    assert sort_order(columns).tolist() == want.to_pylist()


@pytest.mark.parametrize("seed", range(3))
def test_places_are_each_rows_place_in_the_order(seed: int) -> None:
    order = list(range(50))
    random.Random(seed).shuffle(order)
    assert places(np.array(order)).tolist() == [order.index(row) for row in range(50)]


def test_sort_order_of_nothing() -> None:
    empty = pa.chunked_array([], pa.string())
    assert sort_order([empty]).tolist() == []
    assert rows_in([empty], [empty]).tolist() == []
    assert first_rows(np.zeros(0, dtype=np.int64)).tolist() == []
    assert places(np.zeros(0, dtype=np.int64)).tolist() == []
