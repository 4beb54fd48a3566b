"""Certificates for a stopping policy's rate of changed decisions (docs/design.md#certificates).

A policy's true change rate is the mean, over the population the pairs are drawn from, of
its exact per-pair `p_change`. Every per-pair value lies in [0, R], R (`change_range`) the
largest `p_change` any single pair can have under the policy at that K, exact; R = 0 means
it changes nothing by construction.

A certificate is a one-sided test of "the true change rate is at least the budget" by
betting (Waudby-Smith & Ramdas 2023): with z = p_change / R in [0, 1] and b = budget / R,
the wealth prod_i (1 + lambda_i (b - z_i)) is a nonnegative supermartingale under that null
for any bet lambda_i in [0, 1 / (1 - b)) chosen from the pairs before i, so by Markov's
inequality it reaches 1 / alpha with probability at most alpha. The bets follow the
approximate growth-rate-adaptive rule (aGRAPA) from the running mean and variance of the
earlier pairs. The wealth is averaged over `ORDERS` fixed orders of the pairs (an average of
such wealths is one too), so the answer does not hang on the order the pairs were read in.
The bound shown is the least rate of a fixed grid from which the same test rejects every
rate up: a one-sided upper confidence bound.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache
from math import comb

import numpy as np

from tasks.replay.designs import evaluate_patterns
from tasks.replay.family import PAIRED_RULES, PairedRule
from tasks.replay.policies import decision
from tasks.replay.scope import all_patterns

__all__ = [
    "CHANGE_RULES",
    "ORDERS",
    "PAIR_RANGES",
    "assignment_range",
    "certification_order",
    "change_law",
    "change_range",
    "log_wealth",
    "pair_range",
    "pairs_needed",
    "upper_bound",
]

CHANGE_RULES: dict[str, PairedRule] = {
    "full": PairedRule(couples=0, boundary=None),
    "nonstrict": PairedRule(couples=0, boundary="nonstrict"),
    "strict": PairedRule(couples=0, boundary="strict"),
    "paired_unanimity": PairedRule(couples=1, boundary=None),
    **PAIRED_RULES,
}
"""Every policy as a start of m couples (0: none) and a boundary on the rest."""
ORDERS = 16
"""Fixed orders of the pairs the wealth is averaged over."""
CAP = 0.95
"""Bets stop at this share of 1 / (1 - b), so one pair at the range keeps 5% of the wealth."""
_GRID = 128
"""Nulls (on a log scale from 1/n: no fewer than about 3 / n can be rejected) the shown bound
is searched over."""
_CELLS = 1 << 21
"""Wealth terms computed at once (nulls x orders x pairs)."""


def change_law(policy: str) -> tuple[int, bool]:
    """Policies with the same key change exactly the same decisions on every assignment.

    A strict boundary (or none) stops only once the reference decision is settled, so such a
    policy changes a decision only by stopping on a unanimous start of m couples: its changes
    depend on m alone, and shrink as m grows (a unanimous start of m + 1 couples begins with
    one of m). A nonstrict boundary changes decisions of its own, on top of its start's.
    """
    rule = CHANGE_RULES[policy]
    return rule.couples, rule.boundary == "nonstrict"


def certification_order(policies: list[str]) -> list[tuple[int, bool]]:
    """The change laws of `policies` in the fixed order they are tested, each expected to
    change no more decisions than the next: the settled laws, more couples first (nested: a
    unanimous start of m + 1 couples begins with one of m); then `nonstrict`, which per pair
    changes at least twice what paired unanimity does at K <= 4 (not beyond); then
    `paired_nonstrict`, which changes everything `paired_strict` does and, on every grid at
    K = 4 and 6, at least what `nonstrict` does."""
    return sorted(
        {change_law(p) for p in policies},
        key=lambda law: (law[1], law[0] if law[1] else -law[0]),
    )


PAIR_RANGES: dict[tuple[int, int], Fraction] = {
    **{(1, k): Fraction(k // 2 - 1, k - 1) for k in range(4, 17, 2)},
    (2, 6): Fraction(0),
    (2, 8): Fraction(1, 35),
    (2, 10): Fraction(1, 21),
    (2, 12): Fraction(2, 33),
    (2, 14): Fraction(10, 143),
    (2, 16): Fraction(1, 13),
}
"""The largest per-pair `p_change` under `balanced` of a settled law with a start of m couples
(m, K), over every pattern of the grid at K, for 0 < m < K / 2; computed exactly by
`pair_range` (tests/replay/test_certify.py recomputes it up to K = 10)."""


@cache
def change_range(policy: str, k: int) -> Fraction:
    """The largest `p_change` any single pair can have under `policy` at K = k: the range of
    every per-pair value the certificate averages; 0 for a policy that changes nothing by
    construction. A per-pair value is an average over the pair's `balanced` assignments, so
    it can stay below `assignment_range` (at K = 4 `paired_strict` changes at most 1/2 of the
    decisions of one assignment, yet at most 1/3 of a pair's)."""
    couples, nonstrict = change_law(policy)
    m = min(couples, k // 2)
    if m == k // 2:  # the start is the whole reference
        return Fraction(0)
    if nonstrict:
        return Fraction(1)  # a judge that always picks one slot: every decision changes
    if m == 0:
        return Fraction(0)
    return PAIR_RANGES[(m, k)]


def pair_range(policy: str, k: int) -> Fraction:
    """`change_range` computed: the exact replay of every pattern of the grid at K (every
    count of the nine couple types, C(K + 8, 8) of them) under `balanced`, its largest
    `p_change` as the fraction nearest to it (every value is a ratio of counts, exact in
    floats to about 1e-15)."""
    patterns = all_patterns(k)
    most = 0.0
    for start in range(0, len(patterns), 20_000):
        metrics = evaluate_patterns(patterns[start : start + 20_000], k, "balanced", (policy,))
        most = max(most, float(metrics.policy[policy][:, 1].max()))
    return Fraction(most).limit_denominator(10**7)


@cache
def assignment_range(policy: str, k: int) -> Fraction:
    """The largest P(decision changed) of `policy` on one reference assignment at K = k (at
    least `change_range`: a pair averages over its assignments)."""
    couples, nonstrict = change_law(policy)
    half = k // 2
    m = min(couples, half)
    if m == half:  # the start is the whole reference
        return Fraction(0)
    if nonstrict:
        return Fraction(1)
    if m == 0:
        return Fraction(0)
    most = Fraction(0)
    sides = [(a, b) for a in range(half + 1) for b in range(half + 1 - a)]
    for a1, b1 in sides:
        for a2, b2 in sides:
            reference = decision(a1 + a2, b1 + b2)
            stops = (  # P(the start is all A), P(all B): hypergeometric on each side
                Fraction(comb(a1, m) * comb(a2, m), comb(half, m) ** 2),
                Fraction(comb(b1, m) * comb(b2, m), comb(half, m) ** 2),
            )
            changed = sum((p for d, p in enumerate(stops) if d != reference), Fraction(0))
            most = max(most, changed)
    return most


def _orders(n: int) -> np.ndarray:
    """ORDERS fixed permutations of n pairs (the same for every policy, budget and run)."""
    rng = np.random.default_rng(n)
    return np.stack([rng.permutation(n) for _ in range(ORDERS)])


def log_wealth(z: np.ndarray, nulls: np.ndarray) -> np.ndarray:
    """log of the wealth against "mean >= b" for each null b of `nulls` (in (0, 1)), from
    values z in [0, 1] (one per pair), averaged over ORDERS fixed orders of the pairs."""
    n = len(z)
    if n == 0:
        return np.zeros(len(nulls))
    zz = z[_orders(n)][None]  # (1, ORDERS, n)
    seen = np.arange(1, n + 1)  # one pseudo-pair at 0 before the first
    mean = (np.cumsum(zz, axis=2) - zz) / seen
    var = np.maximum((np.cumsum(zz * zz, axis=2) - zz * zz) / seen - mean * mean, 0.0)
    out = []
    step = max(1, _CELLS // (ORDERS * n))
    for start in range(0, len(nulls), step):
        b = np.asarray(nulls[start : start + step], dtype=float)[:, None, None]
        gap = b - mean
        spread = var + gap * gap
        bet = np.divide(gap, spread, out=np.zeros_like(spread), where=spread > 0)
        bet = np.clip(bet, 0.0, CAP / (1.0 - b))
        logs = np.log1p(bet * (b - zz)).sum(axis=2)  # (nulls, ORDERS)
        top = logs.max(axis=1)
        out.append(top + np.log(np.exp(logs - top[:, None]).mean(axis=1)))
    return np.concatenate(out)


def upper_bound(values: np.ndarray, *, scale: float, budget: float, alpha: float) -> float:
    """A (1 - alpha) upper confidence bound on the mean of `values` in [0, scale]: the least
    point of a fixed log grid (from 1/n, the budget in it) from which the test rejects every
    point up (`scale` when it rejects none). Valid: if the truth exceeds it, the test at the
    grid point just below the truth, one fixed test of a true null, rejected."""
    if scale <= 0.0:
        return 0.0
    z = np.clip(np.asarray(values, dtype=float) / scale, 0.0, 1.0)
    grid = np.geomspace(1.0 / max(len(z), 2), 1.0, _GRID + 1)[:-1]
    grid = np.unique(np.append(grid, min(budget / scale, 1.0 - 1e-9)))
    rejected = log_wealth(z, grid) >= math.log(1.0 / alpha)
    if not rejected[-1]:
        return scale
    kept = np.flatnonzero(~rejected)
    first = 0 if kept.size == 0 else kept[-1] + 1
    return float(grid[first] * scale)


def pairs_needed(values: np.ndarray, *, scale: float, budget: float, alpha: float) -> int | None:
    """About how many pairs would be certified within `budget` if they changed decisions as
    these do: log(1 / alpha) over the best growth rate of the wealth on these values (None when
    their mean change is not below the budget: no number of pairs will do)."""
    z = np.clip(np.asarray(values, dtype=float) / scale, 0.0, 1.0)
    b = budget / scale
    if b >= 1.0:
        return 0
    if z.mean() >= b:
        return None
    bets = np.linspace(0.0, CAP / (1.0 - b), 201)[1:]
    growth = np.log1p(bets[:, None] * (b - z[None, :])).mean(axis=1).max()
    return math.ceil(math.log(1.0 / alpha) / growth)
