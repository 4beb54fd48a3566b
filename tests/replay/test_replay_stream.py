"""File-to-file replay, group by group, gives the in-memory replay's tables (replay/stream.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.errors import InputError
from tasks.replay.engine import replay, write_replay
from tasks.replay.stream import replay_file

TABLES = ("replay", "summary", "design", "components")
KEYS = ("judge", "config", "dataset", "design", "policy", "component", "pair_id")


def in_key_order(table: pa.Table) -> pa.Table:
    """Rows sorted by their key columns (group by group, a pair's rows follow its first
    appearance in the group's rows rather than in the whole input)."""
    return table.sort_by([(k, "ascending") for k in KEYS if k in table.column_names])


def rows(seed: int = 3) -> list[dict[str, object]]:
    """Three groups (K = 4, 2 and 4), keys A, B and none, rows shuffled across groups."""
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for judge, dataset, k, pairs in (("j1", "d", 4, 40), ("j2", "d", 2, 30), ("j1", "e", 4, 25)):
        for p in range(pairs):
            key = rng.choice(["A", "B", None])
            for s in range(k):
                for order in ("AB", "BA"):
                    outcome = rng.choice("AABBTXIM")
                    out.append(
                        {
                            "judge": judge,
                            "config": "c",
                            "dataset": dataset,
                            "pair_id": f"p{p}",
                            "seed": s,
                            "order": order,
                            "outcome": outcome,
                            "key": key,
                        }
                    )
    rng.shuffle(out)
    return out


def test_replay_file_writes_the_in_memory_tables(tmp_path: Path) -> None:
    calls = tmp_path / "calls.parquet"
    pq.write_table(pa.Table.from_pylist(rows()), calls, row_group_size=200)
    expected = write_replay(replay(pq.read_table(calls), where=str(calls)), tmp_path / "memory")
    written = replay_file(calls, tmp_path / "stream")
    for name in TABLES:
        got, want = pq.read_table(written[name]), pq.read_table(expected[name])
        assert got.num_rows == want.num_rows > 0
        assert got.schema.equals(want.schema), name
        got, want = in_key_order(got), in_key_order(want)
        for column in got.column_names:
            values, reference = got[column].to_pylist(), want[column].to_pylist()
            if pa.types.is_floating(got.schema.field(column).type):
                # Patterns are evaluated in other batches, so sums may differ in the last bit.
                assert [v is None for v in values] == [v is None for v in reference]
                pairs = [(v, r) for v, r in zip(values, reference, strict=True) if v is not None]
                assert all(abs(v - r) <= 1e-12 for v, r in pairs), (name, column)
            else:
                assert values == reference, (name, column)


def test_replay_file_names_the_same_row_as_replay(tmp_path: Path) -> None:
    bad = rows()
    bad[17]["outcome"] = "Q"
    calls = tmp_path / "calls.parquet"
    pq.write_table(pa.Table.from_pylist(bad), calls)
    with pytest.raises(InputError) as memory:
        replay(pq.read_table(calls), where=str(calls))
    with pytest.raises(InputError) as streamed:
        replay_file(calls, tmp_path / "out")
    assert str(streamed.value) == str(memory.value)
    assert "row 18" in str(streamed.value)
    assert not (tmp_path / "out" / "replay.parquet").exists()
