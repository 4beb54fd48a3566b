"""The replay input as the encoder reads it: dictionary columns replay as plain text columns,
and a file is read into jemalloc's Arrow pool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
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


@pytest.mark.parametrize(("chosen", "pool"), [(None, "jemalloc"), ("system", "system")])
def test_reading_the_input_allocates_from_jemalloc_unless_a_pool_is_chosen(
    chosen: str | None, pool: str, tmp_path: Path
) -> None:
    """Arrow's default mimalloc pool marks its arena for huge pages, which a first large
    read pays for in system time; ARROW_DEFAULT_MEMORY_POOL still decides when set."""
    path = tmp_path / "calls.parquet"
    pq.write_table(calls(), path)
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    script = (
        "import sys, pyarrow as pa\n"
        "from tasks.replay.grid import read_replay_input\n"
        "read_replay_input(sys.argv[1])\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == pool
