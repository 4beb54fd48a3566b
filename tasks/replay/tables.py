"""The replay's Arrow tables, built from the compact result (`tasks.replay.compact`).

Per-pair tables (replay, design) are made of one record batch per (group, label), in row
order group -> label -> pair: text columns are constant arrays or zero-copy slices of the
pair ids, float columns one vectorised gather of the pattern rows by the pairs' codes.
Batches are built by two threads (the gathers release the GIL), at most two ahead of
the consumer. Summary and component
tables are per group, from count-weighted pattern means.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from schemas import ComponentRow, DesignRow, ReplayRow, SummaryRow, arrow_schema
from tasks.replay.compact import THREADS, VALUE_COLUMNS, Compact
from tasks.replay.designs import component_costs
from tasks.replay.matching import cost_to_match

__all__ = [
    "TextColumns",
    "component_table",
    "design_batches",
    "replay_batches",
    "summary_table",
]


class TextColumns:
    """Constant string columns: one array per value, grown as needed and sliced for every
    batch that repeats it."""

    def __init__(self) -> None:
        self.arrays: dict[str, pa.Array] = {}

    def __call__(self, value: str, length: int) -> pa.Array:
        array = self.arrays.get(value)
        if array is None or len(array) < length:
            array = self.arrays[value] = pa.repeat(pa.scalar(value, pa.string()), length)
        return array.slice(0, length)


def _batches(
    compact: Compact,
    labels: Sequence[tuple[str, ...]],
    floats: np.ndarray,
    schema: pa.Schema,
    constant: TextColumns,
) -> Iterator[pa.RecordBatch]:
    """Record batches in row order group -> label -> pair; `floats` is (columns, labels, rows)."""
    grid = compact.grid
    starts = grid.group_starts.tolist() + [len(grid.pair_group)]

    def batch(task: tuple[int, int]) -> pa.RecordBatch:
        g, li = task
        lo, hi = starts[g], starts[g + 1]
        text = [constant(name, hi - lo) for name in grid.groups[g]]
        text.append(grid.pair_ids.slice(lo, hi - lo))
        text.extend(constant(name, hi - lo) for name in labels[li])
        gathered = np.take(floats[:, li, :], compact.code[lo:hi], axis=1)
        return pa.RecordBatch.from_arrays([*text, *gathered], schema=schema)

    tasks = [(g, li) for g in range(len(grid.groups)) for li in range(len(labels))]
    # At most THREADS batches ahead of the consumer, so a streaming writer bounds memory.
    with ThreadPoolExecutor(THREADS) as pool:
        ahead: deque[Future[pa.RecordBatch]] = deque()
        for task in tasks:
            ahead.append(pool.submit(batch, task))
            if len(ahead) > THREADS:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def replay_batches(
    compact: Compact, combos: list[tuple[str, str]], constant: TextColumns
) -> Iterator[pa.RecordBatch]:
    """ReplayRow batches without the money column (`tasks.replay.money` adds it)."""
    schema = arrow_schema(ReplayRow, added=False)
    return _batches(compact, combos, compact.values, schema, constant)


def design_batches(
    compact: Compact, designs: list[str], constant: TextColumns
) -> Iterator[pa.RecordBatch]:
    """DesignRow batches."""
    labels = [(d,) for d in designs]
    return _batches(compact, labels, compact.design, arrow_schema(DesignRow), constant)


def summary_table(
    compact: Compact, combos: list[tuple[str, str]], component_means: dict[str, np.ndarray]
) -> pa.Table:
    """Per-group policy means, with the cost to match from the group component means."""
    grid = compact.grid
    pairs = np.diff(np.append(grid.group_starts, len(grid.pair_group)))
    means = compact.group_means(compact.values)  # (columns, combos, groups)
    rows = []
    for g, (judge, config, dataset) in enumerate(grid.groups):
        k = int(grid.group_k[g])
        for ci, (design, policy) in enumerate(combos):
            mean = {name: float(means[vi, ci, g]) for vi, name in enumerate(VALUE_COLUMNS)}
            row: dict[str, object] = {
                "judge": judge,
                "config": config,
                "dataset": dataset,
                "design": design,
                "policy": policy,
                "pairs": int(pairs[g]),
                **mean,
                "savings": 1.0 - mean["expected_calls"] / k,
                "match_cost": None,
                "match_extra": None,
            }
            if policy != "full":
                costs = component_costs(design, k)
                agreements = component_means[design][: len(costs), g]
                cost = cost_to_match(costs.tolist(), agreements.tolist(), 1.0 - mean["p_change"])
                if not math.isnan(cost):
                    row["match_cost"] = cost
                    row["match_extra"] = cost / mean["expected_calls"] - 1.0
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=arrow_schema(SummaryRow))


def component_table(compact: Compact, component_means: dict[str, np.ndarray]) -> pa.Table:
    """Mean agreement of each nonadaptive component per group and design."""
    grid = compact.grid
    rows = []
    for design, means in component_means.items():
        for g, (judge, config, dataset) in enumerate(grid.groups):
            k = int(grid.group_k[g])
            costs = component_costs(design, k)
            names = [f"k={size}" for size in range(1, k + 1)] + ["balanced pair"]
            for ci, cost in enumerate(costs.tolist()):
                rows.append(
                    {
                        "judge": judge,
                        "config": config,
                        "dataset": dataset,
                        "design": design,
                        "component": names[ci],
                        "cost": cost,
                        "agreement": float(means[ci, g]),
                    }
                )
    return pa.Table.from_pylist(rows, schema=arrow_schema(ComponentRow))
