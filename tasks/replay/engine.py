"""The exact replay of stopping policies under reference selection designs (docs/design.md#replay).

`replay` turns cached call outcomes into three tables: per-pair policy metrics
(`replay.parquet`), their per-group summaries with the cost to match (`summary.parquet`) and
per-pair design metrics (`design.parquet`). Pairs sharing a grid of outcome classes share
every A-score metric, so the engine evaluates each distinct pattern once, exactly, by
enumerating the design's assignments, and scatters the results back to the pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas import ComponentRow, DesignRow, ReplayRow, SummaryRow, arrow_schema
from schemas.vocabulary import CORE_POLICIES, DESIGNS, POLICIES
from tasks.errors import InputError
from tasks.replay.designs import POLICY_DESIGNS, POLICY_METRICS, component_costs, evaluate_patterns
from tasks.replay.grid import ReplayGrid, build_grid, dense_codes
from tasks.replay.matching import cost_to_match
from tasks.replay.money import add_money
from tasks.storage import write_parquet_atomic

__all__ = [
    "DESIGNS",
    "POLICIES",
    "ReplayResult",
    "design_policy_pairs",
    "replay",
    "write_replay",
]

VALUE_COLUMNS = (
    "expected_calls",
    "p_change",
    "p_neutral_to_decisive",
    "p_decisive_to_neutral",
    "p_reversal",
    "expected_score",
    "reference_score",
    "added_variance",
)
"""The float columns of a ReplayRow, in schema order."""
_SCORES = (VALUE_COLUMNS.index("expected_score"), VALUE_COLUMNS.index("reference_score"))
_FROM_POLICY = [POLICY_METRICS.index(c) if c in POLICY_METRICS else -1 for c in VALUE_COLUMNS]


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


def _pack(classes: np.ndarray) -> np.ndarray:
    """One uint64 per pair from its (K, 2) grid of 2-bit classes (K <= 16 fits 64 bits)."""
    flat = classes.reshape(len(classes), -1).astype(np.uint64)
    code = np.zeros(len(classes), dtype=np.uint64)
    for position in range(flat.shape[1]):
        code |= flat[:, position] << np.uint64(2 * position)
    return code


def _unpack(codes: np.ndarray, k: int) -> np.ndarray:
    """The (P, K, 2) int8 class grids of packed codes."""
    shifts = (2 * np.arange(2 * k)).astype(np.uint64)
    cells = (codes.astype(np.uint64)[:, None] >> shifts[None, :]) & np.uint64(3)
    return cells.astype(np.int8).reshape(len(codes), k, 2)


@dataclass
class _PairMetrics:
    """Per-pair engine output before it becomes tables (A-scores flipped for key B).

    Pairs are the last axis, so each (column, combo, group) run is one contiguous slice.
    """

    values: np.ndarray  # (VALUE_COLUMNS, combos, pairs)
    design: np.ndarray  # (3, designs, pairs): expected_score, p_neutral, expected_agreement
    components: dict[str, np.ndarray]  # design -> (Kmax + 1, pairs) component agreements


def _evaluate(grid: ReplayGrid, designs: list[str], combos: list[tuple[str, str]]) -> _PairMetrics:
    n_pairs, k_max, _ = grid.classes.shape
    values = np.empty((len(VALUE_COLUMNS), len(combos), n_pairs))
    design_values = np.empty((3, len(designs), n_pairs))
    components = {d: np.full((k_max + 1, n_pairs), np.nan) for d in designs}
    policies = tuple(dict.fromkeys(p for _, p in combos))
    pair_k = grid.pair_k
    for k in np.unique(grid.group_k).tolist():
        rows = np.flatnonzero(pair_k == k)
        everyone = len(rows) == n_pairs
        classes = grid.classes if everyone and k == k_max else grid.classes[rows, :k, :]
        packed = _pack(classes)
        inverse, codes = dense_codes(packed, 4 ** (2 * k))
        patterns = _unpack(codes, k)
        per_value = np.empty((len(VALUE_COLUMNS), len(combos), len(patterns)))
        per_design = np.empty((3, len(designs), len(patterns)))
        for di, design in enumerate(designs):
            metrics = evaluate_patterns(patterns, design, policies)
            per_design[:, di] = [
                metrics.reference_score,
                metrics.p_neutral,
                metrics.expected_agreement,
            ]
            agreement = metrics.component_agreement.T
            components[design][: len(agreement), rows] = agreement[:, inverse]
            for ci, (d, policy) in enumerate(combos):
                if d == design:
                    per_pattern = metrics.policy[policy]
                    for vi, source in enumerate(_FROM_POLICY):
                        per_value[vi, ci] = (
                            metrics.reference_score if source < 0 else per_pattern[:, source]
                        )
        # Scatter pattern results back to pairs in one gather per table.
        if everyone:
            values = np.take(per_value, inverse, axis=2)
            design_values = np.take(per_design, inverse, axis=2)
        else:
            values[:, :, rows] = np.take(per_value, inverse, axis=2)
            design_values[:, :, rows] = np.take(per_design, inverse, axis=2)
    # Against key B the score is 1 - A-score; key A and no key both use the A-score.
    flip = np.broadcast_to(grid.key_b, values.shape[1:])
    for vi in _SCORES:
        np.subtract(1.0, values[vi], out=values[vi], where=flip)
    np.subtract(1.0, design_values[0], out=design_values[0], where=flip[: len(designs)])
    return _PairMetrics(values=values, design=design_values, components=components)


def _runs(
    grid: ReplayGrid, labels: Sequence[tuple[str, ...]], floats: np.ndarray
) -> list[pa.ChunkedArray]:
    """Table columns in row order group -> label -> pair, built from zero-copy slices.

    `labels` are the per-run label columns (design, or design and policy); `floats` has
    shape (columns, labels, pairs).
    """
    starts = grid.group_starts.tolist() + [len(grid.pair_group)]
    text: list[list[pa.Array]] = [[] for _ in range(4 + len(labels[0]))]
    numbers: list[list[pa.Array]] = [[] for _ in range(floats.shape[0])]
    for g, names in enumerate(grid.groups):
        lo, hi = starts[g], starts[g + 1]
        # One constant array per value and group, shared by every run that repeats it.
        constant = {
            name: pa.repeat(pa.scalar(name, pa.string()), hi - lo)
            for name in dict.fromkeys((*names, *(n for label in labels for n in label)))
        }
        pair_ids = grid.pair_ids.slice(lo, hi - lo)
        for li, label in enumerate(labels):
            for i, name in enumerate(names):
                text[i].append(constant[name])
            text[3].append(pair_ids)
            for i, name in enumerate(label):
                text[4 + i].append(constant[name])
            for vi in range(floats.shape[0]):
                numbers[vi].append(pa.array(floats[vi, li, lo:hi]))
    return [pa.chunked_array(c, pa.string()) for c in text] + [
        pa.chunked_array(c, pa.float64()) for c in numbers
    ]


def _replay_table(grid: ReplayGrid, combos: list[tuple[str, str]], m: _PairMetrics) -> pa.Table:
    schema = arrow_schema(ReplayRow, added=False)  # money columns: tasks.replay.money
    return pa.Table.from_arrays(_runs(grid, combos, m.values), schema=schema)


def _design_table(grid: ReplayGrid, designs: list[str], m: _PairMetrics) -> pa.Table:
    columns = _runs(grid, [(d,) for d in designs], m.design)
    return pa.Table.from_arrays(columns, schema=arrow_schema(DesignRow))


def _group_sizes(grid: ReplayGrid) -> np.ndarray:
    """The number of pairs in each group."""
    return np.diff(np.append(grid.group_starts, len(grid.pair_group)))


def _group_means(grid: ReplayGrid, per_pair: np.ndarray) -> np.ndarray:
    """Per-group means of an array whose last axis is pairs (that axis becomes groups)."""
    return np.add.reduceat(per_pair, grid.group_starts, axis=-1) / _group_sizes(grid)


def _summary_table(
    grid: ReplayGrid,
    combos: list[tuple[str, str]],
    m: _PairMetrics,
    component_means: dict[str, np.ndarray],
) -> pa.Table:
    """Per-group policy means, with the cost to match from the group component means."""
    pairs = _group_sizes(grid)
    means = _group_means(grid, m.values)  # (columns, combos, groups)
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


def _component_table(grid: ReplayGrid, component_means: dict[str, np.ndarray]) -> pa.Table:
    """Mean agreement of each nonadaptive component per group and design."""
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


def replay(
    outcomes: pa.Table | pd.DataFrame,
    *,
    designs: Sequence[str] = DESIGNS,
    policies: Sequence[str] = CORE_POLICIES,
    where: str = "replay input",
    costs: pa.Table | None = None,
) -> ReplayResult:
    """Replay each policy under each design exactly, for each pair of the outcomes table.

    By default the core policies (`CORE_POLICIES`) under all three designs.

    `outcomes` has the docs/design.md#replay-input columns (extra columns, as in an OutcomeRow
    table, are ignored); `where` names it in errors. `costs` (a call's USD per
    `tasks.replay.money.MONEY_KEYS`) fills the money columns; without it they are null.
    """
    combos = design_policy_pairs(designs, policies)
    used_designs = [d for d in DESIGNS if d in designs]
    table = (
        pa.Table.from_pandas(outcomes, preserve_index=False)
        if isinstance(outcomes, pd.DataFrame)
        else outcomes
    )
    grid = build_grid(table, where=where)
    metrics = _evaluate(grid, used_designs, combos)
    # The summary's cost to match reads the same group means the components table reports.
    component_means = {d: _group_means(grid, metrics.components[d]) for d in used_designs}
    replay_table, summary_table = add_money(
        table,
        costs,
        _replay_table(grid, combos, metrics),
        _summary_table(grid, combos, metrics, component_means),
    )
    return ReplayResult(
        replay=replay_table,
        summary=summary_table,
        design=_design_table(grid, used_designs, metrics),
        components=_component_table(grid, component_means),
    )


def write_replay(result: ReplayResult, out_dir: str | Path) -> dict[str, Path]:
    """Write replay, summary, design and components parquet files (replacing older ones)."""
    out = Path(out_dir)
    names = ("replay", "summary", "design", "components")
    paths = {name: out / f"{name}.parquet" for name in names}
    for name, path in paths.items():
        write_parquet_atomic(getattr(result, name), path, overwrite=True)
    return paths
