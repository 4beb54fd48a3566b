"""The exact replay of stopping policies under reference selection designs (SPEC sections 3-6).

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

from schemas import DesignRow, ReplayRow, SummaryRow, arrow_schema
from schemas.vocabulary import DESIGNS, POLICIES
from tasks.errors import InputError
from tasks.match import cost_to_match
from tasks.replay_designs import POLICY_DESIGNS, POLICY_METRICS, component_costs, evaluate_patterns
from tasks.replay_grid import ReplayGrid, build_grid
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
    """The replay's three tables, conforming to ReplayRow, SummaryRow and DesignRow."""

    replay: pa.Table
    summary: pa.Table
    design: pa.Table


def design_policy_pairs(
    designs: Sequence[str] = DESIGNS, policies: Sequence[str] = POLICIES
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
            f"{list(designs)} (paired_unanimity needs balanced)"
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


@dataclass
class _PairMetrics:
    """Per-pair engine output before it becomes tables (A-scores flipped for key B)."""

    values: np.ndarray  # (columns, pairs, combos)
    design: np.ndarray  # (3, pairs, designs): expected_score, p_neutral, expected_agreement
    components: dict[str, np.ndarray]  # design -> (pairs, Kmax + 1) component agreements


def _evaluate(grid: ReplayGrid, designs: list[str], combos: list[tuple[str, str]]) -> _PairMetrics:
    n_pairs, k_max, _ = grid.classes.shape
    values = np.empty((len(VALUE_COLUMNS), n_pairs, len(combos)))
    design_values = np.empty((3, n_pairs, len(designs)))
    components = {d: np.full((n_pairs, k_max + 1), np.nan) for d in designs}
    policies = tuple(dict.fromkeys(p for _, p in combos))
    pair_k = grid.pair_k
    for k in np.unique(grid.group_k).tolist():
        rows = np.flatnonzero(pair_k == k)
        classes = grid.classes[rows, :k, :]
        _, first, inverse = np.unique(_pack(classes), return_index=True, return_inverse=True)
        patterns = classes[first]
        for di, design in enumerate(designs):
            metrics = evaluate_patterns(patterns, design, policies)
            design_values[0, rows, di] = metrics.reference_score[inverse]
            design_values[1, rows, di] = metrics.p_neutral[inverse]
            design_values[2, rows, di] = metrics.expected_agreement[inverse]
            n_comp = metrics.component_agreement.shape[1]
            components[design][rows, :n_comp] = metrics.component_agreement[inverse]
            for ci, (d, policy) in enumerate(combos):
                if d != design:
                    continue
                per_pattern = metrics.policy[policy]
                for vi, source in enumerate(_FROM_POLICY):
                    column = metrics.reference_score if source < 0 else per_pattern[:, source]
                    values[vi, rows, ci] = column[inverse]
    # Against key B the score is 1 - A-score; key A and no key both use the A-score.
    flip = grid.key_b
    for vi in _SCORES:
        values[vi, flip] = 1.0 - values[vi, flip]
    design_values[0, flip] = 1.0 - design_values[0, flip]
    return _PairMetrics(values=values, design=design_values, components=components)


def _group_columns(grid: ReplayGrid, per_pair: int) -> list[pa.Array]:
    """judge, config, dataset, pair_id columns with each pair repeated `per_pair` times."""
    pair_index = pa.array(np.repeat(np.arange(len(grid.pair_group)), per_pair))
    group_index = pa.array(np.repeat(grid.pair_group, per_pair))
    columns = [
        pa.array([g[i] for g in grid.groups], pa.string()).take(group_index) for i in range(3)
    ]
    return [*columns, grid.pair_ids.take(pair_index)]


def _replay_table(grid: ReplayGrid, combos: list[tuple[str, str]], m: _PairMetrics) -> pa.Table:
    n_pairs, n_combos = len(grid.pair_group), len(combos)
    tiled = pa.array(np.tile(np.arange(n_combos), n_pairs))
    labels = [pa.array([c[i] for c in combos], pa.string()).take(tiled) for i in range(2)]
    floats = [pa.array(m.values[vi].reshape(-1)) for vi in range(len(VALUE_COLUMNS))]
    return pa.Table.from_arrays(
        [*_group_columns(grid, n_combos), *labels, *floats], schema=arrow_schema(ReplayRow)
    )


def _design_table(grid: ReplayGrid, designs: list[str], m: _PairMetrics) -> pa.Table:
    n_pairs = len(grid.pair_group)
    tiled = pa.array(np.tile(np.arange(len(designs)), n_pairs))
    label = pa.array(designs, pa.string()).take(tiled)
    floats = [pa.array(m.design[i].reshape(-1)) for i in range(3)]
    return pa.Table.from_arrays(
        [*_group_columns(grid, len(designs)), label, *floats], schema=arrow_schema(DesignRow)
    )


def _summary_table(grid: ReplayGrid, combos: list[tuple[str, str]], m: _PairMetrics) -> pa.Table:
    n_groups = len(grid.groups)
    pairs = np.bincount(grid.pair_group, minlength=n_groups)

    def group_mean(column: np.ndarray) -> np.ndarray:
        return np.bincount(grid.pair_group, weights=column, minlength=n_groups) / pairs

    component_means = {
        design: np.stack([group_mean(col) for col in agreement.T], axis=1)
        for design, agreement in m.components.items()
    }
    rows = []
    for g, (judge, config, dataset) in enumerate(grid.groups):
        k = int(grid.group_k[g])
        for ci, (design, policy) in enumerate(combos):
            means = {
                name: float(group_mean(m.values[vi, :, ci])[g])
                for vi, name in enumerate(VALUE_COLUMNS)
            }
            row: dict[str, object] = {
                "judge": judge,
                "config": config,
                "dataset": dataset,
                "design": design,
                "policy": policy,
                "pairs": int(pairs[g]),
                **means,
                "savings": 1.0 - means["expected_calls"] / k,
                "match_cost": None,
                "match_extra": None,
            }
            if policy != "full":
                costs = component_costs(design, k)
                agreements = component_means[design][g, : len(costs)]
                cost = cost_to_match(costs.tolist(), agreements.tolist(), 1.0 - means["p_change"])
                if not math.isnan(cost):
                    row["match_cost"] = cost
                    row["match_extra"] = cost / means["expected_calls"] - 1.0
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=arrow_schema(SummaryRow))


def replay(
    outcomes: pa.Table | pd.DataFrame,
    *,
    designs: Sequence[str] = DESIGNS,
    policies: Sequence[str] = POLICIES,
    where: str = "replay input",
) -> ReplayResult:
    """Replay every policy under every design exactly, for each pair of the outcomes table.

    `outcomes` has the SPEC section 6 input columns (extra columns, as in an OutcomeRow
    table, are ignored); `where` names it in errors.
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
    return ReplayResult(
        replay=_replay_table(grid, combos, metrics),
        summary=_summary_table(grid, combos, metrics),
        design=_design_table(grid, used_designs, metrics),
    )


def write_replay(result: ReplayResult, out_dir: str | Path) -> dict[str, Path]:
    """Write replay.parquet, summary.parquet and design.parquet (replacing older outputs)."""
    out = Path(out_dir)
    paths = {name: out / f"{name}.parquet" for name in ("replay", "summary", "design")}
    for name, path in paths.items():
        write_parquet_atomic(getattr(result, name), path, overwrite=True)
    return paths
