"""Reference selection designs: exact per-pattern expectations over their assignments.

A pattern is one pair's grid as the counts of its couple types, shape (3, 3)
(`tasks.replay.couples`). Given an assignment, every metric of every policy and component is a
function of the reference's sufficient state: its A and B counts (a, b), or under `balanced`
those counts per side (a1, b1, a2, b2). Each design's metric is then a per-state table weighed
by how many of the design's assignments reach each state (`tasks.replay.states`), computed for
many patterns at once. Scores here are A-scores; the caller turns them into scores against key
`B` (score = 1 - A-score).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tasks.replay.family import PAIRED, paired_table, side_counts
from tasks.replay.policies import (
    DEC_N,
    DECISION_A_SCORE,
    balanced_pair_agreement,
    full_decision_table,
    stopping_table,
    subset_agreement_table,
)
from tasks.replay.states import (
    common_expectation,
    independent_expectation,
    side_expectation,
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
    **{name: ("balanced",) for name in PAIRED},
}
"""The designs each policy is defined under (the paired policies need order balance)."""


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
    policy: dict[str, np.ndarray]
    """Per policy, shape (P, len(POLICY_METRICS)); expected_score is an A-score."""
    component_agreement: np.ndarray
    """Shape (P, components): agreement of each nonadaptive component with the reference."""


def _policy_columns(dist: np.ndarray, full: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Metric columns for one assignment from the stopped-decision distribution (..., 3)."""
    p_a, p_b, p_n = dist[..., 0], dist[..., 1], dist[..., 2]
    neutral = full == DEC_N
    # The chances of the other decisions, summed (not 1 - the kept one's): exactly 0 where a
    # policy never changes the decision, as its tables' other chances are.
    changed = np.where(np.arange(3) == full[..., None], 0.0, dist).sum(axis=-1)
    score = p_a + 0.5 * p_n
    second_moment = p_a + 0.25 * p_n
    return np.stack(
        [
            calls,
            changed,
            np.where(neutral, p_a + p_b, 0.0),
            np.where(neutral, 0.0, p_n),
            np.where(full == 0, p_b, 0.0) + np.where(full == 1, p_a, 0.0),
            score,
            np.maximum(second_moment - score * score, 0.0),
        ],
        axis=-1,
    )


def _state_table(
    k: int, design: str, policies: tuple[str, ...], a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Per state (the states' A and B totals `a`, `b`, any shape): the reference score,
    P(neutral), each policy's POLICY_METRICS and each component's agreement, on the last axis.
    Under `balanced` the states are (AB side, BA side) splits of `side_counts(K/2)`."""
    index = a * (k + 1) + b
    full = full_decision_table(k)[index]
    columns = [DECISION_A_SCORE[full][..., None], (full == DEC_N)[..., None].astype(float)]
    for policy in policies:
        if policy == "full":
            dist = (full[..., None] == np.arange(3)).astype(float)
            calls = np.full(full.shape, float(k))
        elif policy in PAIRED:
            law = paired_table(k, PAIRED[policy])
            dist, calls = law.decided, law.calls
        else:
            stop = stopping_table(k, strict=policy == "strict")[index]
            dist, calls = stop[..., :3], stop[..., 3]
        columns.append(_policy_columns(dist, full, calls))
    columns.append(subset_agreement_table(k)[index])
    if design == "balanced":
        side = side_counts(k // 2)
        first, second = side[:, None, :], side[None, :, :]
        split = (first[..., 0], first[..., 1], second[..., 0], second[..., 1])
        columns.append(balanced_pair_agreement(*split, full, k)[..., None])
    return np.concatenate(columns, axis=-1)


@lru_cache(maxsize=64)
def _design_table(k: int, design: str, policies: tuple[str, ...]) -> np.ndarray:
    """The per-state table of a design: under `balanced` shape (S, S, columns) over the
    (AB side, BA side) splits of `side_counts(K/2)`; otherwise ((K + 1)^2, columns) over
    (a, b), row a * (K + 1) + b, zero where a + b > K."""
    if design == "balanced":
        side = side_counts(k // 2)
        a = side[:, None, 0] + side[None, :, 0]
        b = side[:, None, 1] + side[None, :, 1]
        return _state_table(k, design, policies, a, b)
    a, b = (x.ravel() for x in np.indices((k + 1, k + 1)))
    valid = a + b <= k
    table = _state_table(k, design, policies, np.where(valid, a, 0), np.where(valid, b, 0))
    table[~valid] = 0.0
    return table


def _expect(counts: np.ndarray, k: int, design: str, policies: tuple[str, ...]) -> np.ndarray:
    """Shape (P, columns of the state table): its expectation under the design per pattern."""
    table = _design_table(k, design, policies)
    flat = table.reshape(-1, table.shape[-1])
    if design != "balanced":
        flat = flat[(np.add.outer(np.arange(k + 1), np.arange(k + 1)) <= k).ravel()]
    # A column constant over the states is its own expectation; equal columns share one.
    varying = np.flatnonzero(np.ptp(flat, axis=0) > 0)
    _, first, inverse = np.unique(flat[:, varying], axis=1, return_index=True, return_inverse=True)
    chosen = np.ascontiguousarray(table[..., varying[first]])
    if design == "common":
        values = common_expectation(counts, k, chosen)
    elif design == "independent":
        values = independent_expectation(counts, k, chosen)
    else:
        values = side_expectation(counts, k, k // 2, chosen)
    out = np.broadcast_to(flat[0], (len(counts), flat.shape[1])).copy()
    out[:, varying] = values[:, inverse.ravel()]
    return out


def evaluate_patterns(
    counts: np.ndarray, k: int, design: str, policies: tuple[str, ...]
) -> PatternMetrics:
    """Exact design and policy metrics for each pattern (P, 3, 3) of couple counts."""
    wanted = tuple(p for p in policies if design in POLICY_DESIGNS[p])
    values = _expect(counts, k, design, wanted)
    width = len(POLICY_METRICS)
    return PatternMetrics(
        reference_score=values[:, 0],
        p_neutral=values[:, 1],
        policy={p: values[:, 2 + i * width : 2 + (i + 1) * width] for i, p in enumerate(wanted)},
        component_agreement=values[:, 2 + len(wanted) * width :],
    )
