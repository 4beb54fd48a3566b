"""Paired stopping policies: a start of couples, then a boundary (docs/design.md#paired-family).

Under `balanced`, the K/2 `AB` calls are matched to the K/2 `BA` calls by a uniform perfect
matching and the couples run in uniform order. A paired policy executes its first `couples`
couples; it stops with their decision if all their calls are decisive and equal, or if they
already meet the boundary (`start_stops`). Otherwise the remaining calls run in a uniformly
random order under a boundary (`strict`, `nonstrict`, or none: every call runs), exactly as
the sequential policies stop.

The law of a paired policy on one assignment depends only on the class counts of its `AB`
calls (a1, b1, other) and of its `BA` calls (a2, b2, other): the first m couples draw an
m-subset of each side, so the start is a product of two hypergeometric draws, and the rest is
`sequential_law` from the start's counts. Laws are computed in exact fractions, once per
(K, policy, counts) actually met.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from math import comb

import numpy as np

from tasks.replay.policies import boundary_stops, decision, sequential_law

__all__ = [
    "PAIRED_RULES",
    "PairedRule",
    "paired_law",
    "paired_lookup",
    "side_draws",
    "start_stops",
]


@dataclass(frozen=True)
class PairedRule:
    """A paired start of `couples` couples, then `boundary` on the remaining calls."""

    couples: int
    boundary: str | None


PAIRED_RULES: dict[str, PairedRule] = {
    "paired_nonstrict": PairedRule(couples=1, boundary="nonstrict"),
    "paired_strict": PairedRule(couples=1, boundary="strict"),
    "paired_unanimity_2": PairedRule(couples=2, boundary="strict"),
}
"""The paired family beside `paired_unanimity` (one couple, no boundary), by policy name."""


def side_draws(a: int, b: int, c: int, size: int) -> list[tuple[int, int, Fraction]]:
    """(A drawn, B drawn, probability) of a uniform `size`-subset of a side with counts a, b, c."""
    total = comb(a + b + c, size)
    return [
        (i, j, Fraction(comb(a, i) * comb(b, j) * comb(c, size - i - j), total))
        for i in range(min(a, size) + 1)
        for j in range(min(b, size - i) + 1)
        if size - i - j <= c
    ]


def start_stops(k: int, rule: PairedRule, m: int, n_a: int, n_b: int) -> bool:
    """Whether a paired policy stops right after its start of m couples with n_a A and n_b B:
    all 2m calls decisive and equal, or the rule's boundary already met with K - 2m calls left
    (docs/design.md#paired-family; it can be only for paired_unanimity_2 at K = 6)."""
    return 2 * m in (n_a, n_b) or boundary_stops(abs(n_a - n_b), k - 2 * m, rule.boundary)


@cache
def paired_law(
    k: int, rule: PairedRule, a1: int, b1: int, a2: int, b2: int
) -> tuple[float, float, float, float]:
    """(P(A), P(B), P(N), E calls) of `rule` on an assignment with the given side counts."""
    half = k // 2
    m = min(rule.couples, half)
    c1, c2 = half - a1 - b1, half - a2 - b2
    out = [Fraction(0)] * 4
    for i1, j1, p1 in side_draws(a1, b1, c1, m):
        for i2, j2, p2 in side_draws(a2, b2, c2, m):
            p = p1 * p2
            n_a, n_b = i1 + i2, j1 + j2
            if start_stops(k, rule, m, n_a, n_b):
                out[decision(n_a, n_b)] += p
                out[3] += p * 2 * m
                continue
            rest = (a1 + a2 - n_a, b1 + b2 - n_b, c1 + c2 - (2 * m - n_a - n_b))
            law = sequential_law(k, rest, boundary=rule.boundary, start=(n_a, n_b))
            for index, value in enumerate(law):
                out[index] += p * value
    return float(out[0]), float(out[1]), float(out[2]), float(out[3])


def paired_lookup(
    policy: str,
    a_ab: np.ndarray,
    b_ab: np.ndarray,
    a_ba: np.ndarray,
    b_ba: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Stopped-decision distribution (..., 3) and expected calls of a paired policy."""
    rule = PAIRED_RULES[policy]
    side = k // 2 + 1
    code = ((a_ab * side + b_ab) * side + a_ba) * side + b_ba
    present, inverse = np.unique(code, return_inverse=True)
    laws = np.array(
        [
            paired_law(k, rule, *(int(c) // side**e % side for e in (3, 2, 1, 0)))
            for c in present.tolist()
        ]
    ).reshape(len(present), 4)
    per_cell = laws[inverse.reshape(code.shape)]
    return per_cell[..., :3], per_cell[..., 3]
