"""The exact replay of stopping policies under reference selection designs (docs/design.md#replay).

`replay` turns cached call outcomes into three tables: per-pair policy metrics
(`replay.parquet`), their per-group summaries with the cost to match (`summary.parquet`) and
per-pair design metrics (`design.parquet`). Pairs sharing a pattern (their counts of couple
types) share every A-score metric, so the engine evaluates each distinct pattern once, exactly,
by counting the design's assignments per reference state, and scatters the results back to the
pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd
import pyarrow as pa
from threadpoolctl import ThreadpoolController

from schemas import DesignRow, ReplayRow, arrow_schema
from schemas.vocabulary import CORE_POLICIES, DESIGNS, POLICIES
from tasks.errors import InputError
from tasks.replay.coded import require_columns
from tasks.replay.compact import THREADS, PatternCache, evaluate
from tasks.replay.designs import POLICY_DESIGNS
from tasks.replay.grid import replay_grids
from tasks.replay.money import Prices, pair_usd, summary_usd
from tasks.replay.tables import (
    Constants,
    component_table,
    design_batches,
    replay_batches,
    summary_table,
)
from tasks.storage import write_parquet_atomic

__all__ = [
    "DESIGNS",
    "POLICIES",
    "ReplayResult",
    "design_policy_pairs",
    "replay",
    "replay_into",
    "write_replay",
]


@dataclass(frozen=True)
class ReplayResult:
    """The replay's tables, conforming to ReplayRow, SummaryRow, DesignRow and ComponentRow."""

    replay: pa.Table
    summary: pa.Table
    design: pa.Table
    components: pa.Table


def design_policy_pairs(
    designs: Sequence[str] = DESIGNS, policies: Sequence[str] = CORE_POLICIES
) -> list[tuple[str, str]]:
    """The (design, policy) combinations replayed, leaving out designs a policy lacks."""
    unknown = [d for d in designs if d not in DESIGNS] + [p for p in policies if p not in POLICIES]
    if unknown:
        raise InputError(
            f"unknown design or policy {unknown}; designs are {list(DESIGNS)}, "
            f"policies are {list(POLICIES)}"
        )
    if not designs or not policies:
        raise InputError("replay needs at least one design and one policy")
    combos = [
        (d, p)
        for p in dict.fromkeys(policies)
        for d in dict.fromkeys(designs)
        if d in POLICY_DESIGNS[p]
    ]
    if not combos:
        raise InputError(
            f"no requested policy {list(policies)} is defined under the requested designs "
            f"{list(designs)} (paired_unanimity needs balanced, as does every paired policy)"
        )
    order = {d: i for i, d in enumerate(DESIGNS)}
    return sorted(combos, key=lambda c: (order[c[0]], POLICIES.index(c[1])))


@cache
def _blas() -> ThreadpoolController:
    """The BLAS libraries this process has loaded (NumPy's), found once: finding them reads
    the path of every loaded shared library (about 130 in a command, 10 ms or more), which
    `threadpool_limits` did on every replay."""
    return ThreadpoolController().select(user_api="blas")


def replay_into(
    batches: Iterable[pa.RecordBatch],
    replay_out: Callable[[pa.RecordBatch], object],
    design_out: Callable[[pa.RecordBatch], object],
    *,
    designs: Sequence[str] = DESIGNS,
    policies: Sequence[str] = CORE_POLICIES,
    where: str = "replay input",
    costs: pa.Table | None = None,
    constant: Constants | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Replay the input `batches` group by group; hand the per-pair replay and design rows to
    `replay_out` and `design_out` batch by batch (rows in order group -> design and policy
    -> pair), and return the (small) summary and components tables. `constant` makes the
    constant columns (`Constants(text_as_dictionary=True)` for batches a parquet writer
    takes; the batches' schemas are then its `schema` of ReplayRow's and DesignRow's).

    Only the input's codes and one group's results are held at a time.
    """
    combos = design_policy_pairs(designs, policies)
    used_designs = [d for d in DESIGNS if d in designs]
    constant = constant or Constants()
    replay_schema = constant.schema(arrow_schema(ReplayRow))
    prices = Prices(costs)
    cache = PatternCache(used_designs, combos)
    summaries, components = [], []
    # The replay runs its own two threads; BLAS threads beside them only spin (3x the CPU).
    with _blas().limit(limits=1):
        for grid in replay_grids(batches, where):
            compact = evaluate(grid, cache)
            # The summary's cost to match reads the same group means the components table has.
            means = {d: compact.pattern_means(compact.components[d]) for d in used_designs}
            usd = pair_usd(grid, prices, combos)
            for batch, money in zip(replay_batches(compact, combos, constant), usd, strict=True):
                columns = [*batch.columns, money]
                replay_out(pa.RecordBatch.from_arrays(columns, schema=replay_schema))
            for batch in design_batches(compact, used_designs, constant):
                design_out(batch)
            summaries.append(summary_usd(summary_table(compact, combos, means), usd, combos))
            components.append(component_table(compact, means))
            del grid, compact
    return pa.concat_tables(summaries), pa.concat_tables(components)


def replay(
    outcomes: pa.Table | pd.DataFrame,
    *,
    designs: Sequence[str] = DESIGNS,
    policies: Sequence[str] = CORE_POLICIES,
    where: str = "replay input",
    costs: pa.Table | None = None,
) -> ReplayResult:
    """Replay each policy under each design exactly, for each pair of the outcomes table,
    in memory (`tasks.replay.stream.replay_file` writes a file's replay group by group).

    By default the core policies (`CORE_POLICIES`) under all three designs.

    `outcomes` has the docs/design.md#replay-input columns (extra columns, as in an OutcomeRow
    table, are ignored); `where` names it in errors. `costs` (a call's USD per
    `tasks.replay.money.MONEY_KEYS`) fills the money columns; without it they are null.
    """
    table = (
        pa.Table.from_pandas(outcomes, preserve_index=False)
        if isinstance(outcomes, pd.DataFrame)
        else outcomes
    )
    require_columns(table.column_names, where)  # a table without rows has no batches
    replay_rows: list[pa.RecordBatch] = []
    design_rows: list[pa.RecordBatch] = []
    summary, components = replay_into(
        table.to_batches(),
        replay_rows.append,
        design_rows.append,
        designs=designs,
        policies=policies,
        where=where,
        costs=costs,
    )
    return ReplayResult(
        replay=pa.Table.from_batches(replay_rows, schema=arrow_schema(ReplayRow)),
        summary=summary,
        design=pa.Table.from_batches(design_rows, schema=arrow_schema(DesignRow)),
        components=components,
    )


def write_replay(result: ReplayResult, out_dir: str | Path) -> dict[str, Path]:
    """Write replay, summary, design and components parquet files (replacing older ones)."""
    out = Path(out_dir)
    names = ("replay", "summary", "design", "components")
    paths = {name: out / f"{name}.parquet" for name in names}
    with ThreadPoolExecutor(THREADS) as pool:  # the parquet writer releases the GIL
        done = [
            pool.submit(write_parquet_atomic, getattr(result, name), path, overwrite=True)
            for name, path in paths.items()
        ]
        for future in done:
            future.result()
    return paths
