"""Stopping policies and nonadaptive components as exact per-K lookup tables over reference counts.

Given one reference assignment, every metric of `full`, `nonstrict`, `strict` and of a
uniformly random k-subset depends only on the counts (a, b, c) of `A`, `B` and other outcomes
among its K calls (a uniformly random call order is a uniformly random sequence of that
multiset). Tables are indexed by `a * (K + 1) + b`; rows with a + b > K are NaN.
`paired_unanimity` also needs the split of those counts between the `AB` and `BA` calls, so
it is a closed-form function instead of a table.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from math import comb

import numpy as np

# Outcome classes. Decisions only see A, B and "neither"; agreement also needs T apart.
CLASS_A, CLASS_B, CLASS_T, CLASS_OTHER = 0, 1, 2, 3
# Decision codes, also the column order of every (p_A, p_B, p_N) distribution.
DEC_A, DEC_B, DEC_N = 0, 1, 2
DECISION_A_SCORE = np.array([1.0, 0.0, 0.5])
"""A-score of each decision code: A=1, B=0, N=0.5 (score against key A, or without a key)."""


def decision(n_a: int, n_b: int) -> int:
    """Decision code of a multiset with `n_a` A votes and `n_b` B votes."""
    if n_a > n_b:
        return DEC_A
    if n_b > n_a:
        return DEC_B
    return DEC_N


def count_index(k: int) -> list[tuple[int, int, int]]:
    """Every (a, b, index) with a + b <= k, index = a * (k + 1) + b."""
    return [(a, b, a * (k + 1) + b) for a in range(k + 1) for b in range(k + 1 - a)]


def boundary_stops(margin: int, left: int, boundary: str | None) -> bool:
    """Whether a sequential run stops with this |#A - #B| and `left` calls still to run:
    `strict` when the margin exceeds them, `nonstrict` when it reaches them, never for None."""
    if boundary == "strict":
        return margin > left
    if boundary == "nonstrict":
        return margin >= left
    return False


def sequential_law(
    k: int,
    rest: tuple[int, int, int],
    *,
    boundary: str | None,
    start: tuple[int, int] = (0, 0),
) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """Exact (P(A), P(B), P(N), E calls) of sequential stopping over a random call order.

    `start` holds the A and B counts of the calls already executed (K minus the size of
    `rest` of them); the remaining calls, with class counts `rest` = (A, B, other), run in a
    uniformly random order. After call t the run stops when |#A - #B| >= K - t (`nonstrict`),
    > K - t (`strict`), or only at t = K (`None`); the decision is that of the executed calls.
    A dynamic programme over the counts drawn so far; the next call's class is drawn without
    replacement from what remains, which is the law of a uniformly random permutation.
    """
    a, b, c = rest
    done = k - a - b - c
    stopped = [Fraction(0)] * 3
    if done == k:
        stopped[decision(*start)] = Fraction(1)
        return stopped[0], stopped[1], stopped[2], Fraction(k)
    frontier: dict[tuple[int, int, int], Fraction] = {(0, 0, 0): Fraction(1)}
    calls = Fraction(0)
    for t in range(done + 1, k + 1):
        remaining = k - t + 1
        following: dict[tuple[int, int, int], Fraction] = {}
        for (i, j, m), p in frontier.items():
            for state, left in (
                ((i + 1, j, m), a - i),
                ((i, j + 1, m), b - j),
                ((i, j, m + 1), c - m),
            ):
                if left == 0:
                    continue
                q = p * Fraction(left, remaining)
                n_a, n_b = start[0] + state[0], start[1] + state[1]
                if boundary_stops(abs(n_a - n_b), k - t, boundary) or t == k:
                    stopped[decision(n_a, n_b)] += q
                    calls += q * t
                else:
                    following[state] = following.get(state, Fraction(0)) + q
        frontier = following
    return stopped[0], stopped[1], stopped[2], calls


@lru_cache(maxsize=64)
def stopping_table(k: int, *, strict: bool) -> np.ndarray:
    """Per (a, b): [P(stop A), P(stop B), P(stop N), E calls] of nonstrict or strict stopping."""
    table = np.full(((k + 1) ** 2, 4), np.nan)
    for a, b, index in count_index(k):
        law = sequential_law(k, (a, b, k - a - b), boundary="strict" if strict else "nonstrict")
        table[index] = [float(x) for x in law]
    table.setflags(write=False)
    return table


@lru_cache(maxsize=64)
def full_decision_table(k: int) -> np.ndarray:
    """Per (a, b): the reference decision code (-1 where a + b > K)."""
    table = np.full((k + 1) ** 2, -1, dtype=np.int8)
    for a, b, index in count_index(k):
        table[index] = decision(a, b)
    table.setflags(write=False)
    return table


@lru_cache(maxsize=64)
def subset_agreement_table(k: int) -> np.ndarray:
    """Per (a, b), column j: P(decision of a uniform (j+1)-subset == reference decision).

    The subset's class counts are multivariate hypergeometric.
    """
    table = np.full(((k + 1) ** 2, k), np.nan)
    for a, b, index in count_index(k):
        c = k - a - b
        reference = decision(a, b)
        for size in range(1, k + 1):
            hits = sum(
                comb(a, i) * comb(b, j) * comb(c, size - i - j)
                for i in range(min(a, size) + 1)
                for j in range(min(b, size - i) + 1)
                if decision(i, j) == reference
            )
            table[index, size - 1] = hits / comb(k, size)
    table.setflags(write=False)
    return table


def paired_unanimity(
    a_ab: np.ndarray,
    b_ab: np.ndarray,
    a_ba: np.ndarray,
    b_ba: np.ndarray,
    full: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Stopped-decision distribution (..., 3) and expected calls of paired unanimity.

    Under a uniform perfect matching run in uniform pair order, the first executed pair is a
    uniformly random (AB call, BA call) couple, so P(stop with A) = a_AB * a_BA / (K/2)^2.
    Otherwise every call runs and the decision is the full reference decision `full`.
    """
    half_sq = float((k // 2) ** 2)
    stop_a = a_ab * a_ba / half_sq
    stop_b = b_ab * b_ba / half_sq
    go_on = 1.0 - stop_a - stop_b
    full_onehot = full[..., None] == np.arange(3)
    dist = np.stack([stop_a, stop_b, np.zeros_like(stop_a)], axis=-1)
    dist += go_on[..., None] * full_onehot
    calls = 2.0 * (stop_a + stop_b) + k * go_on
    return dist, calls


def balanced_pair_agreement(
    a_ab: np.ndarray,
    b_ab: np.ndarray,
    a_ba: np.ndarray,
    b_ba: np.ndarray,
    full: np.ndarray,
    k: int,
) -> np.ndarray:
    """P(decision of a uniform (AB call, BA call) couple == the reference decision)."""
    half = k // 2
    c_ab = half - a_ab - b_ab
    c_ba = half - a_ba - b_ba
    half_sq = float(half * half)
    p_a = (a_ab * a_ba + a_ab * c_ba + c_ab * a_ba) / half_sq
    p_b = (b_ab * b_ba + b_ab * c_ba + c_ab * b_ba) / half_sq
    p_n = 1.0 - p_a - p_b
    return np.choose(full.astype(np.intp), [p_a, p_b, p_n])
