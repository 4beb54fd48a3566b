"""File-to-file replay in bounded memory: the input read once, the results one group at a time.

`replay_file` writes the same four tables as `replay` followed by `write_replay`. The input is
read batch by batch and held only as codes (`tasks.replay.coded`); the per-pair tables are
written batch by batch as each (judge, config, dataset) group is replayed, and only the small
summary and component tables are kept until the end. Every table appears only once the whole
replay succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from schemas import DesignRow, ReplayRow, arrow_schema
from schemas.vocabulary import CORE_POLICIES, DESIGNS
from tasks.replay.engine import replay_into
from tasks.replay.grid import input_batches
from tasks.storage import parquet_writer_atomic, write_parquet_atomic

__all__ = ["replay_file"]


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
    with (
        parquet_writer_atomic(paths["replay"], arrow_schema(ReplayRow)) as replay_out,
        parquet_writer_atomic(paths["design"], arrow_schema(DesignRow)) as design_out,
    ):
        summary, components = replay_into(
            input_batches(calls),
            replay_out.write_batch,
            design_out.write_batch,
            designs=designs,
            policies=policies,
            where=str(calls),
            costs=costs,
        )
    write_parquet_atomic(summary, paths["summary"], overwrite=True)
    write_parquet_atomic(components, paths["components"], overwrite=True)
    return paths
