"""The engine's compact result: exact metrics per distinct pattern, and one code per pair.

Pairs with the same counts of couple types share every A-score metric but agreement
(docs/design.md#exactness), so each distinct pattern (`tasks.replay.couples`) is evaluated
once, exactly. A pair's code selects its row of the per-pattern tables; every pattern has two
rows, the second with its scores taken against key `B` (1 - A-score), so a single gather gives
a pair its final values. Group means are count-weighted sums over the pattern rows a group
uses, never a pass over the pairs. Agreement is kept per pair.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tasks.replay.couples import expected_agreements, grid_counts, pack, pattern_of, unpack
from tasks.replay.designs import POLICY_METRICS, evaluate_patterns
from tasks.replay.grid import ReplayGrid, dense_codes

__all__ = ["THREADS", "VALUE_COLUMNS", "Compact", "PatternCache", "evaluate"]

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
_SLICES = 4
"""Slices of the patterns per design, evaluated as separate tasks."""
_FROM_POLICY = [POLICY_METRICS.index(c) if c in POLICY_METRICS else -1 for c in VALUE_COLUMNS]


@dataclass(frozen=True)
class Compact:
    """A one-group grid, the per-pattern-row tables its pairs use and each pair's row code."""

    grid: ReplayGrid
    code: np.ndarray
    """Per pair, its row in the tables below (pattern x 2 + 1 for key `B`)."""
    values: np.ndarray
    """Shape (VALUE_COLUMNS, combos, rows)."""
    design: np.ndarray
    """Shape (2, designs, rows): expected_score, p_neutral."""
    agreement: np.ndarray
    """Shape (designs, pairs): expected_agreement of each pair."""
    components: dict[str, np.ndarray]
    """Design -> (K + 1, patterns) component agreements (NaN past a pattern's components): one
    column per pattern, not per row (they have no score against a key)."""

    @cached_property
    def _counts(self) -> np.ndarray:
        """Pairs on each row (float)."""
        return np.bincount(self.code, minlength=self.values.shape[-1]).astype(np.float64)

    def means(self, table: np.ndarray) -> np.ndarray:
        """The group's means over pairs of a per-row table (its last axis: rows)."""
        sums = np.einsum("...r,r->...", table, self._counts)  # NumPy's own loop, no BLAS threads
        return sums / float(len(self.code))

    def pattern_means(self, table: np.ndarray) -> np.ndarray:
        """The group's means over pairs of a per-pattern table (its last axis: patterns)."""
        counts = self._counts.reshape(-1, 2).sum(axis=1)  # a pattern's two rows' pairs
        return np.einsum("...p,p->...", table, counts) / float(len(self.code))


def _pattern_tables(
    patterns: np.ndarray, k: int, designs: list[str], combos: list[tuple[str, str]]
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Exact A-score metrics of each pattern (last axis patterns)."""
    n = len(patterns)
    policies = tuple(dict.fromkeys(p for _, p in combos))
    values = np.empty((len(VALUE_COLUMNS), len(combos), n))
    design = np.empty((2, len(designs), n))
    components = {d: np.full((k + 1, n), np.nan) for d in designs}
    # Each design's patterns in slices, so the two threads share the dearest design's work.
    bounds = np.linspace(0, n, min(_SLICES, n) + 1).astype(int).tolist()
    tasks = [(d, lo, hi) for d in designs for lo, hi in zip(bounds, bounds[1:], strict=False)]
    with ThreadPoolExecutor(THREADS) as pool:  # NumPy releases the GIL on these arrays
        evaluated = list(
            pool.map(lambda t: evaluate_patterns(patterns[t[1] : t[2]], k, t[0], policies), tasks)
        )
    for (name, lo, hi), metrics in zip(tasks, evaluated, strict=True):
        di = designs.index(name)
        design[:, di, lo:hi] = [metrics.reference_score, metrics.p_neutral]
        agreement = metrics.component_agreement.T
        components[name][: len(agreement), lo:hi] = agreement
        for ci, (d, policy) in enumerate(combos):
            if d == name:
                per_pattern = metrics.policy[policy]
                for vi, source in enumerate(_FROM_POLICY):
                    values[vi, ci, lo:hi] = (
                        metrics.reference_score if source < 0 else per_pattern[:, source]
                    )
    return values, design, components


def _with_key_b(table: np.ndarray, scores: tuple[int, ...]) -> np.ndarray:
    """Rows interleaved: each pattern's A-score row, then its row against key `B`."""
    both = np.repeat(table, 2, axis=-1)
    for index in scores:
        both[index, ..., 1::2] = 1.0 - both[index, ..., 1::2]
    return both


@dataclass
class _Tables:
    """The patterns of one K evaluated so far (packed, in row order) and their row tables."""

    packed: np.ndarray
    values: np.ndarray
    design: np.ndarray
    components: dict[str, np.ndarray]


_KEPT = 1 << 17
"""Patterns whose tables are kept for later groups (about 2 KB each with the core policies):
every pattern up to K = 12 (at most C(K + 8, 8)), and memory bounded beyond."""


class PatternCache:
    """Per-pattern tables shared by the groups of one replay: a pattern seen in an earlier
    group (of the same K) is not evaluated again, while fewer than `_KEPT` are held; past that
    the earlier groups' tables are dropped."""

    def __init__(self, designs: list[str], combos: list[tuple[str, str]]):
        self.designs = designs
        self.combos = combos
        self.tables: dict[int, _Tables] = {}

    def rows(self, packed: np.ndarray, k: int) -> tuple[np.ndarray, _Tables]:
        """(pattern row of each distinct packed pattern, the tables holding them)."""
        known = self.tables.get(k)
        new = packed if known is None else packed[~np.isin(packed, known.packed)]
        if known is not None and len(known.packed) + len(new) > _KEPT:
            known, new = None, packed
        if len(new):
            values, design, components = _pattern_tables(
                unpack(new, k), k, self.designs, self.combos
            )
            added = _Tables(
                new,
                _with_key_b(values, _SCORES),
                _with_key_b(design, (0,)),
                components,
            )
            if known is not None:
                added = _Tables(
                    np.concatenate([known.packed, new]),
                    np.concatenate([known.values, added.values], axis=-1),
                    np.concatenate([known.design, added.design], axis=-1),
                    {
                        d: np.concatenate([known.components[d], c], axis=-1)
                        for d, c in added.components.items()
                    },
                )
            self.tables[k] = known = added
        assert known is not None
        order = np.argsort(known.packed)
        return order[np.searchsorted(known.packed, packed, sorter=order)], known


def evaluate(grid: ReplayGrid, cache: PatternCache) -> Compact:
    """Evaluate the distinct patterns of a one-group `grid` not in `cache` yet; code each
    pair by its pattern row."""
    k = grid.k
    counts = grid_counts(grid.classes)
    inverse, packed = dense_codes(pack(pattern_of(counts), k), (k + 1) ** 9)
    rows, tables = cache.rows(packed, k)
    return Compact(
        grid=grid,
        code=rows[inverse] * 2 + grid.key_b,
        values=tables.values,
        design=tables.design,
        agreement=expected_agreements(counts, cache.designs),
        components=tables.components,
    )
