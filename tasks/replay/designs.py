"""Reference selection designs: their assignments, and exact per-pattern expectations over them.

A pattern is one pair's full grid of outcome classes, shape (K, 2) with column 0 the `AB`
call and column 1 the `BA` call of each seed. An assignment picks one order per seed; a
design is a uniform distribution over its assignments. Every metric is the plain mean over
the design's assignments of the policy's exact behaviour on that assignment's reference
(tables from `tasks.replay.policies`), computed for many patterns at once. Scores here are
A-scores; the caller turns them into scores against key `B` (score = 1 - A-score).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tasks.replay.family import PAIRED_RULES, paired_lookup
from tasks.replay.policies import (
    CLASS_A,
    CLASS_B,
    CLASS_T,
    DEC_N,
    DECISION_A_SCORE,
    balanced_pair_agreement,
    full_decision_table,
    paired_unanimity,
    stopping_table,
    subset_agreement_table,
)

POLICY_METRICS = (
    "expected_calls",
    "p_change",
    "p_neutral_to_decisive",
    "p_decisive_to_neutral",
    "p_reversal",
    "expected_score",
    "added_variance",
)
"""Per-policy metric columns, in the order of `PatternMetrics.policy` arrays."""

POLICY_DESIGNS: dict[str, tuple[str, ...]] = {
    "full": ("common", "independent", "balanced"),
    "nonstrict": ("common", "independent", "balanced"),
    "strict": ("common", "independent", "balanced"),
    "paired_unanimity": ("balanced",),
    **{name: ("balanced",) for name in PAIRED_RULES},
}
"""The designs each policy is defined under (paired unanimity needs order balance)."""

# Bound on pattern x assignment x seed cells held at once, to cap memory on large inputs.
_CHUNK_CELLS = 1 << 23


@lru_cache(maxsize=64)
def assignments(design: str, k: int) -> np.ndarray:
    """All assignments of `design` for K seeds as rows of order indices (0 = AB, 1 = BA)."""
    if design == "common":
        rows = [(0,) * k, (1,) * k]
    elif design == "independent":
        rows = list(itertools.product((0, 1), repeat=k))
    elif design == "balanced":
        rows = [
            tuple(1 if s in ba else 0 for s in range(k))
            for ba in itertools.combinations(range(k), k // 2)
        ]
    else:
        raise ValueError(f"unknown design {design!r}")
    table = np.array(rows, dtype=np.intp).reshape(len(rows), k)
    table.setflags(write=False)
    return table


def component_costs(design: str, k: int) -> np.ndarray:
    """Costs of the nonadaptive components: k-subsets k = 1..K, plus for `balanced` an
    order-balanced (AB, BA) couple of cost 2."""
    costs = [float(size) for size in range(1, k + 1)]
    if design == "balanced":
        costs.append(2.0)
    return np.array(costs)


@dataclass(frozen=True)
class PatternMetrics:
    """Exact expectations over one design's assignments, one row per pattern."""

    reference_score: np.ndarray
    """E[A-score of the full reference decision]."""
    p_neutral: np.ndarray
    expected_agreement: np.ndarray
    policy: dict[str, np.ndarray]
    """Per policy, shape (P, len(POLICY_METRICS)); expected_score is an A-score."""
    component_agreement: np.ndarray
    """Shape (P, components): agreement of each nonadaptive component with the reference."""


def _policy_columns(dist: np.ndarray, full: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Metric columns for one assignment from the stopped-decision distribution (..., 3)."""
    p_a, p_b, p_n = dist[..., 0], dist[..., 1], dist[..., 2]
    neutral = full == DEC_N
    kept = np.take_along_axis(dist, full[..., None].astype(np.intp), axis=-1)[..., 0]
    score = p_a + 0.5 * p_n
    second_moment = p_a + 0.25 * p_n
    return np.stack(
        [
            calls,
            1.0 - kept,
            np.where(neutral, p_a + p_b, 0.0),
            np.where(neutral, 0.0, p_n),
            np.where(full == 0, p_b, 0.0) + np.where(full == 1, p_a, 0.0),
            score,
            np.maximum(second_moment - score * score, 0.0),
        ],
        axis=-1,
    )


def evaluate_patterns(
    patterns: np.ndarray, design: str, policies: tuple[str, ...]
) -> PatternMetrics:
    """Exact design and policy metrics for each pattern (P, K, 2) of outcome classes."""
    n_patterns, k, _ = patterns.shape
    table = assignments(design, k)
    n_assign = table.shape[0]
    full_table = full_decision_table(k)
    subsets = subset_agreement_table(k)
    stopping = {
        "nonstrict": stopping_table(k, strict=False),
        "strict": stopping_table(k, strict=True),
    }
    wanted = [p for p in policies if design in POLICY_DESIGNS[p]]
    n_components = len(component_costs(design, k))

    reference = np.zeros(n_patterns)
    neutral = np.zeros(n_patterns)
    agreement = np.zeros(n_patterns)
    sums = {p: np.zeros((n_patterns, len(POLICY_METRICS))) for p in wanted}
    components = np.zeros((n_patterns, n_components))
    seeds = np.arange(k)[None, :]

    per_chunk = max(1, _CHUNK_CELLS // max(1, n_patterns * k))
    for start in range(0, n_assign, per_chunk):
        chunk = table[start : start + per_chunk]
        ref = patterns[:, seeds, chunk]  # (P, J, K): the reference's class per seed
        is_a, is_b, is_t = ref == CLASS_A, ref == CLASS_B, ref == CLASS_T
        n_a = is_a.sum(-1)
        n_b = is_b.sum(-1)
        n_t = is_t.sum(-1)
        index = n_a * (k + 1) + n_b
        full = full_table[index]

        reference += DECISION_A_SCORE[full].sum(-1)
        neutral += (full == DEC_N).sum(-1)
        pairs_equal = n_a * (n_a - 1) + n_b * (n_b - 1) + n_t * (n_t - 1)
        agreement += (pairs_equal / (k * (k - 1))).sum(-1)
        components[:, :k] += subsets[index].sum(1)

        if design == "balanced":
            on_ab = chunk[None, :, :] == 0
            a_ab = (is_a & on_ab).sum(-1)
            b_ab = (is_b & on_ab).sum(-1)
            split = (a_ab, b_ab, n_a - a_ab, n_b - b_ab, full, k)
            components[:, k] += balanced_pair_agreement(*split).sum(-1)

        for policy in wanted:
            if policy == "full":
                dist = (full[..., None] == np.arange(3)).astype(float)
                calls = np.full(full.shape, float(k))
            elif policy == "paired_unanimity":
                dist, calls = paired_unanimity(*split)
            elif policy in PAIRED_RULES:
                dist, calls = paired_lookup(policy, *split[:4], k)
            else:
                stop = stopping[policy][index]
                dist, calls = stop[..., :3], stop[..., 3]
            sums[policy] += _policy_columns(dist, full, calls).sum(1)

    return PatternMetrics(
        reference_score=reference / n_assign,
        p_neutral=neutral / n_assign,
        expected_agreement=agreement / n_assign,
        policy={p: s / n_assign for p, s in sums.items()},
        component_agreement=components / n_assign,
    )
