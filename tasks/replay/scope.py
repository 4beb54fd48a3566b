"""What holds at which K (docs/design.md#scope-of-the-half-bound): every pattern of a grid, the
exact change rates of a whole judge whose calls are independent draws, and the properties of
the paired policies that the run's K makes false.

A pattern is the count of seeds of each of the nine couple types (class of the `AB` call,
class of the `BA` call, over `A`, `B`, other): every metric of a pair depends on it alone
(docs/design.md#exactness). A judge whose every call in order o is an independent draw from
the classes' law q_o gives a pattern with the multinomial probability of its counts over the
couple types' probabilities q_AB(x) q_BA(y), so its mean `p_change` over pairs is a finite sum
over the C(K + 8, 8) patterns, exact up to float rounding.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from tasks.replay.designs import evaluate_patterns

__all__ = ["all_patterns", "judge_rates", "scope_notes", "scope_sentence"]


def all_patterns(k: int) -> np.ndarray:
    """Every pattern at K (C(K + 8, 8) of them, shape (P, 3, 3)): the counts of the nine couple
    types, by stars and bars."""
    cuts = np.array(list(combinations(range(k + 8), 8)))
    bounds = np.column_stack([np.full(len(cuts), -1), cuts, np.full(len(cuts), k + 8)])
    return (np.diff(bounds, axis=1) - 1).reshape(-1, 3, 3)


_CHUNK = 20_000
"""Patterns evaluated at once."""


def judge_rates(
    ab: np.ndarray, ba: np.ndarray, k: int, policies: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """Per policy under `balanced`, the exact mean `expected_calls`, `p_change` and
    `p_reversal` over the pairs of a judge whose calls are independent, with class laws `ab`
    and `ba` (probabilities of `A`, `B`, other in each order)."""
    types = np.log(np.maximum(np.outer(ab, ba), 1e-300))
    sums = {p: np.zeros(3) for p in policies}
    patterns = all_patterns(k)
    for start in range(0, len(patterns), _CHUNK):
        part = patterns[start : start + _CHUNK]
        counts = part.reshape(len(part), 9)
        log_coef = math.lgamma(k + 1) - np.vectorize(math.lgamma)(counts + 1.0).sum(axis=1)
        prob = np.exp(log_coef + (counts * types.ravel()).sum(axis=1))
        metrics = evaluate_patterns(part, k, "balanced", policies)
        for p in policies:
            sums[p] += prob @ metrics.policy[p][:, [0, 1, 4]]
    return {
        p: {"expected_calls": v[0], "p_change": v[1], "p_reversal": v[2]} for p, v in sums.items()
    }


def scope_notes(ks: list[int]) -> dict[str, str]:
    """Per paired policy, what a run at these K should not take from the statements made at
    K <= 4 (docs/design.md#scope-of-the-half-bound); empty where every statement holds."""
    top = max(ks, default=0)
    notes: dict[str, str] = {}
    if top >= 6:
        more = (
            "can change more decisions than nonstrict, per pair and for whole judges (the "
            "simulated strong judge at high reasoning: 1.4 times at K = 6, 7.7 times at K = 8), "
            "and can reverse decisions"
        )
        notes["paired_unanimity"] = notes["paired_strict"] = more
        notes["paired_nonstrict"] = "can reverse decisions"
    if top >= 10:
        notes["paired_unanimity_2"] = (
            "can reverse decisions (K = 10, seeds AA AA AA AA BB BB BB BB BB BB: 1/210)"
        )
    return notes


def scope_sentence(ks: list[int], policies: set[str]) -> str:
    """`scope_notes` for the `policies` a run replayed, as one sentence (empty: none)."""
    scoped = [f"{p} {text}" for p, text in scope_notes(ks).items() if p in policies]
    return f" At this run's K: {'; '.join(scoped)}." if scoped else ""
