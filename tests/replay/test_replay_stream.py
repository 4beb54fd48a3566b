"""File-to-file replay, group by group, gives the in-memory replay's tables (replay/stream.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import DesignRow, ReplayRow, arrow_schema
from tasks.errors import InputError
from tasks.replay.engine import replay, write_replay
from tasks.replay.money import MONEY_KEYS
from tasks.replay.stream import _behind, replay_file

TABLES = ("replay", "summary", "design", "components")
KEYS = ("judge", "config", "dataset", "design", "policy", "component", "pair_id")


def in_key_order(table: pa.Table) -> pa.Table:
    """Rows sorted by their key columns (pairs follow their first appearance, which differs
    between inputs holding the same rows in another order)."""
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


def unpriced(row: dict[str, object]) -> bool:
    return (row["judge"], row["pair_id"]) == ("j2", "p3")


def costs_of(calls: list[dict[str, object]]) -> pa.Table:
    """A price per call, the calls of one pair (j2's p3) left unpriced."""
    priced = [
        {**{k: r[k] for k in MONEY_KEYS}, "usd": None if unpriced(r) else 0.001 * i}
        for i, r in enumerate(calls)
    ]
    return pa.Table.from_pylist(priced)


def assert_same_tables(written: dict[str, Path], expected: dict[str, Path]) -> None:
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


def test_replay_file_writes_the_in_memory_tables(tmp_path: Path) -> None:
    calls = tmp_path / "calls.parquet"
    pq.write_table(pa.Table.from_pylist(rows()), calls, row_group_size=200)
    expected = write_replay(replay(pq.read_table(calls), where=str(calls)), tmp_path / "memory")
    written = replay_file(calls, tmp_path / "stream")
    assert_same_tables(written, expected)
    # The per-pair tables are written from dictionary batches without an Arrow schema: they
    # read back with exactly their row model's schema, metadata included.
    for name, model in (("replay", ReplayRow), ("design", DesignRow)):
        assert pq.read_schema(written[name]).equals(arrow_schema(model), check_metadata=True)


def test_replay_file_writes_the_money_columns(tmp_path: Path) -> None:
    calls = tmp_path / "calls.parquet"
    table = pa.Table.from_pylist(rows())
    pq.write_table(table, calls, row_group_size=200)
    costs = costs_of(table.to_pylist())
    memory = replay(table, where=str(calls), costs=costs)
    expected = write_replay(memory, tmp_path / "memory")
    written = replay_file(calls, tmp_path / "stream", costs=costs)
    assert_same_tables(written, expected)
    usd = pq.read_table(written["replay"]).to_pylist()
    assert {r["expected_usd"] is None for r in usd} == {True, False}
    assert all((r["expected_usd"] is None) == unpriced(r) for r in usd)
    summary = pq.read_table(written["summary"]).to_pylist()
    assert {r["judge"] for r in summary if r["expected_usd"] is None} == {"j2"}
    assert {r["judge"] for r in summary if r["savings_usd"] is not None} == {"j1"}


@pytest.mark.parametrize("pair_ids", ["increasing", "unordered"])
def test_rows_in_grid_order_replay_as_shuffled_rows(pair_ids: str, tmp_path: Path) -> None:
    """Rows in grid order (each pair's rows together, by seed then order) take the layout
    without a scatter; shuffled rows the general path: the same tables either way."""
    shuffled = rows()
    rank = {
        f"p{p}": f"p{p}" if pair_ids == "increasing" else f"{(7 * p) % 41:02d}" for p in range(41)
    }
    ordered = sorted(
        shuffled,
        key=lambda r: (str(r["judge"]), str(r["dataset"]), rank[str(r["pair_id"])],
                       str(r["seed"]), str(r["order"])),
    )  # fmt: skip
    tables = {}
    for name, table_rows in (("ordered", ordered), ("shuffled", shuffled)):
        calls = tmp_path / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist(table_rows), calls, row_group_size=300)
        tables[name] = replay_file(calls, tmp_path / name)
    assert_same_tables(tables["ordered"], tables["shuffled"])


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


def test_replay_file_names_missing_columns(tmp_path: Path) -> None:
    calls = tmp_path / "calls.parquet"
    pq.write_table(pa.Table.from_pylist(rows()).drop_columns(["judge", "order"]), calls)
    with pytest.raises(InputError, match=r"missing columns \['judge', 'order'\]") as caught:
        replay_file(calls, tmp_path / "out")
    assert str(caught.value).startswith(str(calls))


def test_a_group_failing_after_others_were_written_leaves_no_table(tmp_path: Path) -> None:
    """The per-pair tables are written on threads of their own while later groups replay: a
    later group's error still leaves no table and no temporary file behind."""
    calls_rows = sorted(rows(), key=lambda r: str(r["judge"]))  # j2's group replays last
    missing = next(i for i, r in enumerate(calls_rows) if r["judge"] == "j2")
    del calls_rows[missing]
    calls = tmp_path / "calls.parquet"
    pq.write_table(pa.Table.from_pylist(calls_rows), calls, row_group_size=200)
    with pytest.raises(InputError, match="judge='j2'.*missing seed") as caught:
        replay_file(calls, tmp_path / "out")
    assert "do not hold exactly the 2K rows" in str(caught.value)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_failed_write_raises_in_the_caller() -> None:
    """A write that fails on the writer thread raises where the batches come from, and no
    write runs once the block is left."""
    done: list[int] = []

    def write(batch: pa.RecordBatch) -> None:
        if batch.num_rows == 3:
            raise OSError(28, "No space left on device")
        done.append(batch.num_rows)

    with pytest.raises(OSError, match="No space left"), _behind(write) as submit:
        for n in range(1, 10):
            submit(pa.record_batch({"x": list(range(n))}))
    settled = list(done)
    assert settled[:2] == [1, 2] and 3 not in settled
    assert len(settled) < 9
