"""How a design's assignments spread over a reference's sufficient state, counted exactly.

A pattern (`tasks.replay.couples`) counts a pair's seeds by couple type (x, y): x the class of
the seed's `AB` call, y of its `BA` call. An assignment that puts j_xy of the n_xy seeds of each
type in `AB` is reached in prod C(n_xy, j_xy) ways, and it gives the reference j_xy calls of
class x on the `AB` side and n_xy - j_xy calls of class y on the `BA` side. Each design is the
set of assignments with a given number of `AB` seeds (none or all for `common`, any for
`independent`, K/2 for `balanced`), so the number of its assignments reaching each reference
state is a coefficient of prod (X_x + Y_y)^n_xy (docs/design.md#exactness):

- `common` and `independent` need only the totals (a, b) of A and B calls
  (`common_expectation`, `ab_distribution`);
- `balanced` needs them per side, (a1, b1) on the `AB` side and (a2, b2) on the `BA` side. The
  `AB` side is read row by row of the pattern: the picks of row x are its `AB` calls of class x.
  The `BA` side's polynomial, of degree less than N = s(s + 1) + 1 for a side of s calls, is
  carried by its values at the N-th roots of unity, where multiplying polynomials is
  multiplying values, and brought back to exact integer counts by the inverse transform
  (`side_expectation`).
"""

from __future__ import annotations

from functools import lru_cache
from math import comb

import numpy as np

from tasks.replay.family import side_counts

__all__ = [
    "ab_distribution",
    "common_expectation",
    "independent_expectation",
    "side_expectation",
]

_CHUNK = 1024
"""Patterns whose `BA`-side values are held at once (at most 27 MB at K = 16)."""


@lru_cache(maxsize=16)
def _binomial_pmf(k: int) -> np.ndarray:
    """pmf[m, j + 2K] = C(m, j) / 2^m for j in -2K..3K (zero outside 0..m): exact dyadic
    floats."""
    pmf = np.zeros((k + 1, 5 * k + 1))
    for m in range(k + 1):
        for j in range(m + 1):
            pmf[m, j + 2 * k] = comb(m, j) / 2**m
    return pmf


def common_expectation(counts: np.ndarray, k: int, table: np.ndarray) -> np.ndarray:
    """Shape (patterns, M): the mean of `table` ((K + 1)^2 rows, a * (K + 1) + b) over the two
    `common` assignments, every seed in `AB` (the rows' totals) or every seed in `BA` (the
    columns')."""
    first, second = counts.sum(axis=2), counts.sum(axis=1)
    every_ab = table[first[:, 0] * (k + 1) + first[:, 1]]
    return 0.5 * (every_ab + table[second[:, 0] * (k + 1) + second[:, 1]])


def ab_distribution(counts: np.ndarray, k: int) -> np.ndarray:
    """Shape (patterns, (K + 1)^2): P(the reference holds a A and b B calls), index
    a * (K + 1) + b, under `independent`; patterns of at most K seeds.

    The seeds of types (A, A), (B, B) and (other, other) add the same class in either order;
    the m1 seeds of types (A, B) and (B, A) add an A or a B with probability 1/2, the m2 of
    (A, other) and (other, A) an A or nothing, the m3 of (B, other) and (other, B) a B or
    nothing, all independently: three binomials. Their dyadic probabilities and every product
    of them are exact in floats.
    """
    n = len(counts)
    out = np.zeros((n, k + 1, k + 1))
    pmf = _binomial_pmf(k)
    d_a, d_b = counts[:, 0, 0], counts[:, 1, 1]
    m1 = counts[:, 0, 1] + counts[:, 1, 0]
    m2 = counts[:, 0, 2] + counts[:, 2, 0]
    m3 = counts[:, 1, 2] + counts[:, 2, 1]
    values = np.arange(k + 1)
    for x in range(k + 1):  # x of the m1 (A, B)-type seeds give an A
        first = pmf[m1, x + 2 * k]
        # a = d_a + x + (A from m2), b = d_b + (m1 - x) + (B from m3)
        pa = pmf[m2[:, None], (values[None, :] - d_a[:, None] - x) + 2 * k]
        pb = pmf[m3[:, None], (values[None, :] - d_b[:, None] - m1[:, None] + x) + 2 * k]
        out += first[:, None, None] * pa[:, :, None] * pb[:, None, :]
    return out.reshape(n, -1)


def independent_expectation(counts: np.ndarray, k: int, table: np.ndarray) -> np.ndarray:
    """Shape (patterns, M): the expectation of `table` ((K + 1)^2 rows, a * (K + 1) + b) over
    the `independent` assignments. Only the three binomials' sizes and the fixed seeds matter
    (`ab_distribution`), so each such reduced pattern is evaluated once."""
    reduced = np.stack(
        [counts[:, 0, 0], counts[:, 1, 1], counts[:, 0, 1] + counts[:, 1, 0],
         counts[:, 0, 2] + counts[:, 2, 0], counts[:, 1, 2] + counts[:, 2, 1]], axis=1,
    )  # fmt: skip
    codes, back = np.unique(reduced @ (k + 1) ** np.arange(5), return_inverse=True)
    keys = codes[:, None] // (k + 1) ** np.arange(5) % (k + 1)
    alike = np.zeros((len(keys), 3, 3), dtype=np.int64)
    alike[:, 0, 0], alike[:, 1, 1], alike[:, 0, 1], alike[:, 0, 2], alike[:, 1, 2] = keys.T
    out = np.empty((len(keys), table.shape[-1]))
    for lo in range(0, len(keys), _CHUNK):
        out[lo : lo + _CHUNK] = ab_distribution(alike[lo : lo + _CHUNK], k) @ table
    return out[back.ravel()]


@lru_cache(maxsize=16)
def _spectra(k: int, side: int) -> tuple[np.ndarray, np.ndarray]:
    """(row index of each (nA, nB, nO), spectra) for patterns of at most K seeds and a `BA`
    side of `side` calls.

    spectra[row, p, i] is the coefficient of z^p in (z + w)^nA (z + w^(s+1))^nB (z + 1)^nO at
    w = exp(2 pi i / N), N = s(s + 1) + 1, for a pattern row of nA, nB, nO seeds whose `BA`
    calls are A, B, other: z counts the row's seeds put in `AB`, w^(a2 + (s+1) b2) the A and B
    calls the others put on the `BA` side. Only i <= N // 2 is kept: the values at the other
    roots are their conjugates.
    """
    half = k // 2
    size = side * (side + 1) + 1
    keep = size // 2 + 1
    rows = np.array(
        [(x, y, z) for x in range(k + 1) for y in range(k + 1 - x) for z in range(k + 1 - x - y)]
    )
    index = np.full((k + 1,) * 3, -1, dtype=np.int64)
    index[rows[:, 0], rows[:, 1], rows[:, 2]] = np.arange(len(rows))
    n_a, n_b, n_o = rows.T
    coefficients = np.zeros((len(rows), half + 1, size))
    ids = np.arange(len(rows))
    for alpha in range(k + 1):  # BA calls of class A, B, other (seeds left on the BA side)
        for beta in range(k + 1 - alpha):
            for gamma in range(k + 1 - alpha - beta):
                picks = n_a + n_b + n_o - alpha - beta - gamma
                ways = _comb(n_a, alpha) * _comb(n_b, beta) * _comb(n_o, gamma)
                ok = (ways > 0) & (picks >= 0) & (picks <= half)
                power = (alpha + (side + 1) * beta) % size
                np.add.at(coefficients, (ids[ok], picks[ok], power), ways[ok])
    roots = np.exp(2j * np.pi * np.outer(np.arange(size), np.arange(keep)) / size)
    return index, coefficients @ roots


def _comb(n: np.ndarray, r: int) -> np.ndarray:
    """C(n, r) elementwise for an array n and a fixed r (exact: float64 below 2^53)."""
    out = np.ones(len(n))
    for i in range(r):
        out *= (n - i) / (i + 1)
    return np.where(n >= r, np.round(out), 0.0)


@lru_cache(maxsize=16)
def _inverse(side: int) -> np.ndarray:
    """Shape (N // 2 + 1, 2, S): the inverse transform of a `BA` side of `side` calls, from the
    real and imaginary parts of a polynomial's values at the first N // 2 + 1 roots to its
    coefficients at each (a2, b2) of `side_counts(side)`: coefficient e = a2 + (s + 1) b2 is
    (1/N) sum_i values_i w^(-i e), and the values at i and N - i are conjugate, so it is the
    value at 0 plus twice the real part of the rest, over N."""
    size = side * (side + 1) + 1
    keep = size // 2 + 1
    states = side_counts(side)
    power = states[:, 0] + (side + 1) * states[:, 1]
    angle = 2 * np.pi * np.outer(np.arange(keep), power) / size
    twice = np.where(np.arange(keep) == 0, 1.0, 2.0)[:, None] / size
    return np.stack([np.cos(angle) * twice, np.sin(angle) * twice], axis=1)


def side_expectation(counts: np.ndarray, k: int, side: int, table: np.ndarray) -> np.ndarray:
    """Shape (patterns, M): per pattern, the expectation of each column of `table` over the
    assignments putting `side` of its seeds in `AB` (every pattern has the same number of
    seeds, at most K). `table` has shape (S1, S2, M): axis 0 the `AB` side's (a1, b1) in
    `side_counts(side)` order, axis 1 the `BA` side's in `side_counts(seeds - side)` order.

    The `AB` side's (a1, b1, other) are the picks of the pattern's rows A, B and other, so for
    each (a1, b1) the `BA` side's polynomial is the product of the three rows' spectra at those
    picks. Its inverse transform, rounded, is the exact count of assignments reaching each
    state (integers below 2^16, float error far below 1/2). Patterns are taken in sets whose
    rows allow the same `AB`-side states: a state that picks more seeds from a row than it
    holds is reached by no assignment and skipped.
    """
    out = np.zeros((len(counts), table.shape[-1]))
    if not len(counts):
        return out
    seeds = int(counts[0].sum())
    index, spectra = _spectra(k, seeds - side)
    inverse = _inverse(seeds - side).reshape(-1, table.shape[1])
    first = side_counts(side)
    picks = np.stack([first[:, 0], first[:, 1], side - first.sum(axis=1)], axis=1)
    rows = index[counts[:, :, 0], counts[:, :, 1], counts[:, :, 2]]  # (P, 3): each row's spectra
    room = np.minimum(counts.sum(axis=2), side)
    sets, members = np.unique(room, axis=0, return_inverse=True)
    for which, allowed in enumerate(sets):
        states = np.flatnonzero((picks <= allowed).all(axis=1))
        weights = table[states].reshape(-1, table.shape[-1])
        mine = np.flatnonzero(members.ravel() == which)
        for lo in range(0, len(mine), _CHUNK):
            part = mine[lo : lo + _CHUNK]
            values = spectra[rows[part, 0][:, None], picks[states, 0]]
            values *= spectra[rows[part, 1][:, None], picks[states, 1]]
            values *= spectra[rows[part, 2][:, None], picks[states, 2]]
            reached = np.rint(values.view(np.float64) @ inverse)  # (part, states, S2)
            out[part] = reached.reshape(len(part), -1) @ weights
    return out / comb(seeds, side)
