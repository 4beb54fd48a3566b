"""File-to-file replay in bounded memory: the input read once, the results one group at a time.

`replay_file` writes the same four tables as `replay` followed by `write_replay`. The input is
read batch by batch and held only as codes (`tasks.replay.coded`); the per-pair tables are
written batch by batch as each (judge, config, dataset) group is replayed, and only the small
summary and component tables are kept until the end. Every table appears only once the whole
replay succeeded.

Writing the per-pair tables is most of a large replay's work (at K = 4, ten replay rows and
three design rows per pair): each is written on a thread of its own while the replay goes on
(parquet encoding releases the GIL), without column statistics (min and max of every column
of every row group, which nothing reads) and without trying a dictionary for pair_id (each
row group holds every pair id once, so the writer would only fall back to plain).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from schemas import DesignRow, ReplayRow, arrow_schema
from schemas.vocabulary import CORE_POLICIES, DESIGNS
from tasks.replay.engine import replay_into
from tasks.replay.grid import input_batches
from tasks.replay.tables import Constants
from tasks.storage import parquet_writer_atomic, write_parquet_atomic

__all__ = ["replay_file"]

_WAITING = 2
"""Batches that may wait for a writer thread before the replay waits for it."""


def per_pair_options(schema: pa.Schema) -> dict[str, Any]:
    """Parquet writer options of a per-pair table (replay, design). The file keeps no Arrow
    schema (its batches' constant text columns are dictionaries, `Constants`): read back,
    its columns take their types from the parquet schema (string, double, not null where
    required), its metadata from `add_key_value_metadata`: `schema` exactly."""
    return {
        "write_statistics": False,
        "use_dictionary": [name for name in schema.names if name != "pair_id"],
        "store_schema": False,
    }


@contextmanager
def _behind(
    write: Callable[[pa.RecordBatch], object],
) -> Iterator[Callable[[pa.RecordBatch], None]]:
    """`write` run on a thread of its own, batch after batch in order, at most `_WAITING`
    batches behind the caller. A failed write raises in the caller (at a later batch or at
    the block's end); once the block ends, no write is running or waiting."""
    pending: deque[Future[object]] = deque()
    with ThreadPoolExecutor(1) as pool:

        def submit(batch: pa.RecordBatch) -> None:
            while len(pending) >= _WAITING:
                pending.popleft().result()
            pending.append(pool.submit(write, batch))

        try:
            yield submit
            while pending:
                pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def replay_file(
    calls: str | Path,
    out_dir: str | Path,
    *,
    designs: Sequence[str] = DESIGNS,
    policies: Sequence[str] = CORE_POLICIES,
    costs: pa.Table | None = None,
) -> dict[str, Path]:
    """Replay a parquet replay input (a run's outcomes.parquet works too); write replay,
    summary, design and components parquet files into `out_dir` (replacing older ones) and
    return their paths. `costs` fills the money columns as in `replay`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        name: out / f"{name}.parquet" for name in ("replay", "summary", "design", "components")
    }
    constant = Constants(text_as_dictionary=True)
    tables = {"replay": arrow_schema(ReplayRow), "design": arrow_schema(DesignRow)}
    with (
        parquet_writer_atomic(
            paths["replay"], constant.schema(tables["replay"]), **per_pair_options(tables["replay"])
        ) as replay_out,
        parquet_writer_atomic(
            paths["design"], constant.schema(tables["design"]), **per_pair_options(tables["design"])
        ) as design_out,
    ):
        with (
            _behind(replay_out.write_batch) as replay_write,
            _behind(design_out.write_batch) as design_write,
        ):
            summary, components = replay_into(
                input_batches(calls),
                replay_write,
                design_write,
                designs=designs,
                policies=policies,
                where=str(calls),
                costs=costs,
                constant=constant,
            )
        for writer, schema in ((replay_out, tables["replay"]), (design_out, tables["design"])):
            writer.add_key_value_metadata(schema.metadata)
    write_parquet_atomic(summary, paths["summary"], overwrite=True)
    write_parquet_atomic(components, paths["components"], overwrite=True)
    return paths
