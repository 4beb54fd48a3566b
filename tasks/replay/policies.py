"""Stopping policies and nonadaptive components as exact per-K tables over a reference's counts.

Given one reference assignment, every metric of `full`, `nonstrict`, `strict` and of a
uniformly random k-subset depends only on the counts (a, b, c) of `A`, `B` and other outcomes
among its K calls (a uniformly random call order is a uniformly random sequence of that
multiset). Tables are indexed by `a * (K + 1) + b` (`count_index`); rows with a + b > K are
NaN. The paired policies also need those counts split by order (`tasks.replay.family`).

A sequential run's law is counted, not multiplied out: `run_laws` counts the class sequences
that reach each stopping point, in integers, for every composition of the calls left at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import comb, factorial

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


def decisions(n_a: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """Decision codes, elementwise (as `decision`)."""
    return np.where(n_a > n_b, DEC_A, np.where(n_b > n_a, DEC_B, DEC_N))


def count_index(k: int) -> list[tuple[int, int, int]]:
    """Every (a, b, index) with a + b <= k, index = a * (k + 1) + b."""
    return [(a, b, a * (k + 1) + b) for a in range(k + 1) for b in range(k + 1 - a)]


def boundary_stops(
    margin: np.ndarray | int, left: np.ndarray | int, boundary: str | None
) -> np.ndarray:
    """Whether a sequential run stops with this |#A - #B| and `left` calls still to run:
    `strict` when the margin exceeds them, `nonstrict` when it reaches them, never for None."""
    if boundary == "strict":
        return np.asarray(margin > left)
    if boundary == "nonstrict":
        return np.asarray(margin >= left)
    return np.zeros(np.shape(margin), dtype=bool)


@dataclass(frozen=True)
class RunLaws:
    """The exact law of a sequential run for every composition of its calls, indexed [a, b]
    by the A and B counts of the calls it may run (the other count is `left - a - b`; NaN
    where a + b > left)."""

    decided: np.ndarray
    """Shape (left + 1, left + 1, 3): P(the run stops with decision A, B, N)."""
    calls: np.ndarray
    """E[calls executed], counting the calls executed before the run."""
    executed: np.ndarray
    """Shape (left + 1, left + 1, 3): E[calls of class A, B, other executed by the run]."""


def _multinomial(a: np.ndarray, b: np.ndarray, c: np.ndarray, n: int) -> np.ndarray:
    """(a + b + c)! / (a! b! c!) elementwise, exactly, for a + b + c <= n (0 where a count is
    negative)."""
    fact = np.array([factorial(i) for i in range(n + 1)], dtype=np.int64)
    ok = (a >= 0) & (b >= 0) & (c >= 0)
    a, b, c = (np.where(ok, x, 0) for x in (a, b, c))
    return np.where(ok, fact[a + b + c] // (fact[a] * fact[b] * fact[c]), 0)


@lru_cache(maxsize=256)
def run_laws(k: int, left: int, start: tuple[int, int], boundary: str | None) -> RunLaws:
    """The law of running `left` calls in a uniformly random order after K - `left` calls with
    A and B counts `start`, for every composition of the `left` calls.

    After call t (counting every executed call) the run stops when |#A - #B| >= K - t
    (`nonstrict`), > K - t (`strict`), or only at t = K (None); the decision is that of the
    executed calls; at least one call runs when any is left. A uniformly random order of calls
    is a uniformly random sequence of their classes, every distinct sequence equally likely:
    `arrive[i, j, o]` counts the class sequences of i A, j B and o other that run without
    stopping before their end (the same for every composition holding them), and
    arrive x (sequences of the calls left after them) / (all sequences) is the probability the
    run stops right there. Integers throughout (at most 16! / (6! 5! 5!) sequences), one
    division each.
    """
    n = left
    i, j, o = np.indices((n + 1, n + 1, n + 1))  # A, B and other calls drawn so far
    t = i + j + o
    margin = np.abs(start[0] + i - start[1] - j)
    stops = (t == n) | ((t >= 1) & boundary_stops(margin, n - t, boundary))
    stops &= t <= n
    arrive = np.zeros((n + 1,) * 3, dtype=np.int64)
    arrive[0, 0, 0] = 1
    for layer in range(n):
        going = np.where((t == layer) & ~stops, arrive, 0)
        arrive[1:] += going[:-1]
        arrive[:, 1:] += going[:, :-1]
        arrive[:, :, 1:] += going[:, :, :-1]
    ends = np.flatnonzero(stops & (arrive > 0))
    ei, ej, eo = i.flat[ends], j.flat[ends], o.flat[ends]
    rest_a, rest_b = (x.ravel() for x in np.indices((n + 1, n + 1)))
    rest_c = n - rest_a - rest_b
    # ways[r, e]: sequences of composition r whose run stops at end point e.
    ways = arrive.flat[ends] * _multinomial(
        rest_a[:, None] - ei, rest_b[:, None] - ej, rest_c[:, None] - eo, n
    )
    total = _multinomial(rest_a, rest_b, rest_c, n)
    valid = rest_c >= 0
    assert (ways.sum(axis=1) == total)[valid].all()
    ended = decisions(start[0] + ei, start[1] + ej)
    share = ways / np.where(valid, total, 1)[:, None]
    decided = np.stack([share[:, ended == d].sum(axis=1) for d in (DEC_A, DEC_B, DEC_N)], -1)
    calls = k - n + share @ (ei + ej + eo).astype(float)
    executed = share @ np.stack([ei, ej, eo], axis=-1).astype(float)
    shape = (n + 1, n + 1)
    nan = np.where(valid, 1.0, np.nan)
    return RunLaws(
        decided=(decided * nan[:, None]).reshape(*shape, 3),
        calls=(calls * nan).reshape(shape),
        executed=(executed * nan[:, None]).reshape(*shape, 3),
    )


@lru_cache(maxsize=64)
def stopping_table(k: int, *, strict: bool) -> np.ndarray:
    """Per (a, b): [P(stop A), P(stop B), P(stop N), E calls] of nonstrict or strict stopping."""
    law = run_laws(k, k, (0, 0), "strict" if strict else "nonstrict")
    table = np.concatenate([law.decided, law.calls[..., None]], axis=-1).reshape(-1, 4)
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
