"""The engine's compact result: exact metrics per distinct pattern, and one code per pair.

Pairs sharing a grid of outcome classes share every A-score metric (docs/design.md#exactness),
so each distinct pattern is evaluated once, exactly. A pair's code selects its row of the
per-pattern tables; every pattern has two rows, the second with its scores taken against
key `B` (1 - A-score), so a single gather gives a pair its final values. Group means are
count-weighted sums over the pattern rows a group uses, never a pass over the pairs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from tasks.replay.designs import POLICY_METRICS, evaluate_patterns
from tasks.replay.grid import ReplayGrid, dense_codes

__all__ = ["THREADS", "VALUE_COLUMNS", "Compact", "evaluate"]

THREADS = 2
"""Threads evaluating designs and building batches (and writing tables): the two cores."""

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
class Compact:
    """Per-pattern-row tables and the row code of each pair of `grid`."""

    grid: ReplayGrid
    code: np.ndarray
    """Per pair, its row in the tables below (pattern x 2 + 1 for key `B`)."""
    values: np.ndarray
    """Shape (VALUE_COLUMNS, combos, rows)."""
    design: np.ndarray
    """Shape (3, designs, rows): expected_score, p_neutral, expected_agreement."""
    components: dict[str, np.ndarray]
    """Design -> (Kmax + 1, rows) component agreements (NaN past a pattern's components)."""

    def group_means(self, table: np.ndarray) -> np.ndarray:
        """Per-group means over pairs of a per-row table (last axis rows -> groups)."""
        grid = self.grid
        starts = grid.group_starts.tolist() + [len(grid.pair_group)]
        means = np.empty((*table.shape[:-1], len(grid.groups)))
        for g in range(len(grid.groups)):
            counts = np.bincount(self.code[starts[g] : starts[g + 1]], minlength=table.shape[-1])
            used = np.flatnonzero(counts)
            sums = table[..., used] @ counts[used].astype(np.float64)
            means[..., g] = sums / float(starts[g + 1] - starts[g])
        return means


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


def _pattern_tables(
    patterns: np.ndarray, k_max: int, designs: list[str], combos: list[tuple[str, str]]
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Exact A-score metrics of each pattern (last axis patterns)."""
    n = len(patterns)
    policies = tuple(dict.fromkeys(p for _, p in combos))
    values = np.empty((len(VALUE_COLUMNS), len(combos), n))
    design = np.empty((3, len(designs), n))
    components = {d: np.full((k_max + 1, n), np.nan) for d in designs}
    with ThreadPoolExecutor(THREADS) as pool:  # NumPy releases the GIL on these arrays
        evaluated = list(pool.map(lambda d: evaluate_patterns(patterns, d, policies), designs))
    for di, (name, metrics) in enumerate(zip(designs, evaluated, strict=True)):
        design[:, di] = [metrics.reference_score, metrics.p_neutral, metrics.expected_agreement]
        agreement = metrics.component_agreement.T
        components[name][: len(agreement)] = agreement
        for ci, (d, policy) in enumerate(combos):
            if d == name:
                per_pattern = metrics.policy[policy]
                for vi, source in enumerate(_FROM_POLICY):
                    values[vi, ci] = (
                        metrics.reference_score if source < 0 else per_pattern[:, source]
                    )
    return values, design, components


def _with_key_b(table: np.ndarray, scores: tuple[int, ...]) -> np.ndarray:
    """Rows interleaved: each pattern's A-score row, then its row against key `B`."""
    both = np.repeat(table, 2, axis=-1)
    for index in scores:
        both[index, ..., 1::2] = 1.0 - both[index, ..., 1::2]
    return both


def evaluate(grid: ReplayGrid, designs: list[str], combos: list[tuple[str, str]]) -> Compact:
    """Evaluate every distinct pattern of `grid` once; code each pair by its pattern row."""
    n_pairs, k_max, _ = grid.classes.shape
    pair_k = grid.pair_k
    code = np.empty(n_pairs, dtype=np.int64)
    parts: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = []
    offset = 0
    for k in np.unique(grid.group_k).tolist():
        rows = np.flatnonzero(pair_k == k)
        everyone = len(rows) == n_pairs
        classes = grid.classes if everyone and k == k_max else grid.classes[rows, :k, :]
        inverse, codes = dense_codes(_pack(classes), 4 ** (2 * k))
        code[rows] = (inverse + offset) * 2 + grid.key_b[rows]
        offset += len(codes)
        parts.append(_pattern_tables(_unpack(codes, k), k_max, designs, combos))
    values = np.concatenate([p[0] for p in parts], axis=-1)
    design = np.concatenate([p[1] for p in parts], axis=-1)
    components = {d: np.concatenate([p[2][d] for p in parts], axis=-1) for d in designs}
    return Compact(
        grid=grid,
        code=code,
        values=_with_key_b(values, _SCORES),
        design=_with_key_b(design, (0,)),
        components={d: np.repeat(c, 2, axis=-1) for d, c in components.items()},
    )
