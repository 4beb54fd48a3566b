"""The replay input as the encoder reads it: dictionary columns replay as plain text columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tasks.errors import InputError
from tasks.replay.engine import replay


def calls(k: int = 4, pairs: int = 3) -> pa.Table:
    """Pairs in grid order, outcomes varied by pair, seed and order."""
    rows = [
        {
            "judge": "j",
            "config": "c",
            "dataset": "d",
            "pair_id": f"p{p}",
            "seed": s,
            "order": o,
            "outcome": "ABTXAB"[(p + 2 * s + i) % 6],
            "key": "AB"[p % 2],
        }
        for p in range(pairs)
        for s in range(k)
        for i, o in enumerate(("AB", "BA"))
    ]
    return pa.Table.from_pylist(rows)


def test_a_dictionary_repeating_a_pair_id_replays_as_text() -> None:
    """A dictionary holding p1 twice: p1's rows use both entries (two runs of one pair)."""
    table = calls()
    text = table["pair_id"].to_pylist()
    dictionary = pa.array(["p0", "p1", "p2", "p1"])
    first_p1 = text.index("p1")
    indices = [
        3 if v == "p1" and i >= first_p1 + 4 else ["p0", "p1", "p2"].index(v)
        for i, v in enumerate(text)
    ]
    coded = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), dictionary)
    assert pc.equal(coded.cast(pa.string()), table["pair_id"].combine_chunks()).to_pylist() == [
        True
    ] * len(text)
    as_dictionary = table.set_column(3, "pair_id", coded)
    got, want = replay(as_dictionary), replay(table)
    for name in ("replay", "summary", "design", "components"):
        assert getattr(got, name).equals(getattr(want, name)), name


def test_an_empty_input_is_refused_by_what_it_lacks() -> None:
    empty = calls().slice(0, 0)
    with pytest.raises(InputError, match="no rows to replay"):
        replay(empty, where="calls.parquet")
    with pytest.raises(InputError, match=r"missing columns \['order'\]"):
        replay(empty.drop_columns(["order"]), where="calls.parquet")
