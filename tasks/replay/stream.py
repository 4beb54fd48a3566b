"""File-to-file replay in bounded memory: one (judge, config, dataset) group at a time.

`replay_file` gives the same four tables as `replay` followed by `write_replay`, in the row
order group -> label -> pair (a group's pairs in order of first appearance among the group's
rows, where `replay` follows the whole input), but holds only one group's input and compact
result in memory: the per-pair tables are written batch by batch, and only the small
summary and component tables are kept until the end. The money columns are null (use
`replay` with `costs` for priced runs). If a group's input is refused, the whole file is
validated as `replay` would, so the error names the same row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from schemas import DesignRow, ReplayRow, arrow_schema
from schemas.vocabulary import CORE_POLICIES, DESIGNS
from tasks.errors import InputError
from tasks.replay.compact import evaluate
from tasks.replay.engine import design_policy_pairs
from tasks.replay.grid import build_grid, input_groups, read_replay_input
from tasks.replay.tables import component_table, design_batches, replay_batches, summary_table
from tasks.storage import parquet_writer_atomic, write_parquet_atomic

__all__ = ["replay_file"]


def replay_file(
    calls: str | Path,
    out_dir: str | Path,
    *,
    designs: Sequence[str] = DESIGNS,
    policies: Sequence[str] = CORE_POLICIES,
) -> dict[str, Path]:
    """Replay a parquet replay input group by group; write replay, summary, design and
    components parquet files into `out_dir` (replacing older ones) and return their paths."""
    combos = design_policy_pairs(designs, policies)
    used_designs = [d for d in DESIGNS if d in designs]
    where = str(calls)
    out = Path(out_dir)
    names = ("replay", "summary", "design", "components")
    paths = {name: out / f"{name}.parquet" for name in names}
    replay_schema = arrow_schema(ReplayRow)
    groups = input_groups(calls)
    if not groups:
        build_grid(read_replay_input(calls), where=where)  # refuses the empty input
    summaries: list[pa.Table] = []
    components: list[pa.Table] = []
    with (
        parquet_writer_atomic(paths["replay"], replay_schema) as replay_out,
        parquet_writer_atomic(paths["design"], arrow_schema(DesignRow)) as design_out,
    ):
        for group in groups:
            try:
                grid = build_grid(read_replay_input(calls, group), where=where)
            except InputError:
                build_grid(read_replay_input(calls), where=where)  # names the offending row
                raise
            compact = evaluate(grid, used_designs, combos)
            means = {d: compact.group_means(compact.components[d]) for d in used_designs}
            for batch in replay_batches(compact, combos):
                money = pa.nulls(batch.num_rows, pa.float64())
                replay_out.write_batch(
                    pa.RecordBatch.from_arrays([*batch.columns, money], schema=replay_schema)
                )
            for batch in design_batches(compact, used_designs):
                design_out.write_batch(batch)
            summaries.append(summary_table(compact, combos, means))
            components.append(component_table(compact, means))
            del grid, compact
    write_parquet_atomic(pa.concat_tables(summaries), paths["summary"], overwrite=True)
    write_parquet_atomic(pa.concat_tables(components), paths["components"], overwrite=True)
    return paths
