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
the sequential run (`tasks.replay.policies.run_laws`) from the start's counts. `paired_table`
holds that law, and each call's chance to be sent, for every such split of counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import comb

import numpy as np

from tasks.replay.policies import boundary_stops, decision, run_laws

__all__ = [
    "PAIRED",
    "PAIRED_RULES",
    "PairedRule",
    "PairedTable",
    "paired_table",
    "side_counts",
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

PAIRED: dict[str, PairedRule] = {
    "paired_unanimity": PairedRule(couples=1, boundary=None),
    **PAIRED_RULES,
}
"""Every paired policy as a rule: paired unanimity is one couple, then every call."""


def start_stops(k: int, rule: PairedRule, m: int, n_a: int, n_b: int) -> bool:
    """Whether a paired policy stops right after its start of m couples with n_a A and n_b B:
    all 2m calls decisive and equal, or the rule's boundary already met with K - 2m calls left
    (docs/design.md#paired-family; it can be only for paired_unanimity_2 at K = 6)."""
    return 2 * m in (n_a, n_b) or bool(boundary_stops(abs(n_a - n_b), k - 2 * m, rule.boundary))


def side_counts(size: int) -> np.ndarray:
    """Every (A count, B count) of a side of `size` calls, shape (states, 2), in the order the
    balanced tables use (`tasks.replay.states`)."""
    return np.array([(a, b) for a in range(size + 1) for b in range(size + 1 - a)], dtype=np.int64)


@dataclass(frozen=True)
class PairedTable:
    """A paired policy on every balanced split of counts: axis 0 the `AB` side's (A, B) counts,
    axis 1 the `BA` side's, both in `side_counts(K/2)` order."""

    decided: np.ndarray
    """Shape (S, S, 3): P(stopped decision A, B, N)."""
    calls: np.ndarray
    """Shape (S, S): E[calls executed]."""
    sent: np.ndarray
    """Shape (S, S, 2, 3): P(a given call on side AB / BA of class A, B, other is sent); 0 where
    the side holds no call of the class."""


def _draws(side: np.ndarray, half: int, m: int) -> list[tuple[int, int, int, np.ndarray]]:
    """(A drawn, B drawn, other drawn, probability per side state) of a uniform m-subset."""
    a, b = side[:, 0], side[:, 1]
    c = half - a - b
    binom = np.vectorize(comb)
    out = []
    for i in range(m + 1):
        for j in range(m + 1 - i):
            p = binom(a, i) * binom(b, j) * binom(c, m - i - j) / comb(half, m)
            out.append((i, j, m - i - j, p.astype(float)))
    return out


@lru_cache(maxsize=64)
def paired_table(k: int, rule: PairedRule) -> PairedTable:
    """The exact law of `rule` and its calls' send probabilities on every balanced split."""
    half = k // 2
    m = min(rule.couples, half)
    side = side_counts(half)
    n = len(side)
    counts = np.zeros((2, n, 3))
    counts[:, :, :2] = side
    counts[:, :, 2] = half - side.sum(axis=1)
    # Per state: A, B and other totals over both sides.
    totals = counts[0][:, None, :] + counts[1][None, :, :]
    decided = np.zeros((n, n, 3))
    calls = np.zeros((n, n))
    sent = np.zeros((n, n, 2, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = [np.where(counts[o] > 0, 1.0 / counts[o], 0.0) for o in (0, 1)]
    for i1, j1, l1, p1 in _draws(side, half, m):
        for i2, j2, l2, p2 in _draws(side, half, m):
            weight = p1[:, None] * p2[None, :]
            n_a, n_b = i1 + i2, j1 + j2
            drawn = (np.array([i1, j1, l1]), np.array([i2, j2, l2]))
            if start_stops(k, rule, m, n_a, n_b):
                decided[..., decision(n_a, n_b)] += weight
                calls += weight * 2 * m
                later = np.zeros((n, n, 3))
            else:
                law = run_laws(k, k - 2 * m, (n_a, n_b), rule.boundary)
                rest = totals - (drawn[0] + drawn[1])
                left = k - 2 * m
                ra, rb = (np.clip(rest[..., x], 0, left).astype(np.intp) for x in (0, 1))
                ok = (rest >= 0).all(axis=-1)
                w = np.where(ok, weight, 0.0)
                decided += w[..., None] * np.nan_to_num(law.decided[ra, rb])
                calls += w * np.nan_to_num(law.calls[ra, rb])
                with np.errstate(invalid="ignore", divide="ignore"):
                    later = np.where(rest > 0, law.executed[ra, rb] / rest, 0.0)
                later = np.nan_to_num(later)
            for o in (0, 1):
                # A call of class x on side o is in the start with probability drawn[x] / count.
                mine = (share[o][:, None, :] if o == 0 else share[o][None, :, :]) * drawn[o]
                sent[:, :, o, :] += weight[..., None] * (mine + (1 - mine) * later)
    present = np.stack(
        [np.broadcast_to(counts[0][:, None, :] > 0, (n, n, 3)),
         np.broadcast_to(counts[1][None, :, :] > 0, (n, n, 3))],
        axis=2,
    )  # fmt: skip
    return PairedTable(decided=decided, calls=calls, sent=np.where(present, sent, 0.0))
