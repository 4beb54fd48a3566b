"""A pair's grid as the counts of its couple types: the pattern the replay evaluates once.

A seed's couple is (class of its `AB` call, class of its `BA` call). Decisions, stopping rules
and money tell three classes apart, `A`, `B` and other (a tie counts as other there), so a
couple has one of nine types, and a pair's pattern is how many of its K couples have each type:
shape (3, 3), indexed [AB class, BA class]. Every design treats the seeds alike and every
metric but agreement reads only class counts (docs/design.md#exactness), so pairs with one
pattern share every A-score metric. Agreement alone tells ties from other outcomes; it is a
closed form over each pair's counts of (AB class, BA class) over all four classes
(`grid_counts`, `expected_agreement`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tasks.replay.policies import CLASS_A, CLASS_B, CLASS_OTHER, CLASS_T

__all__ = [
    "THREE",
    "couple_counts",
    "expected_agreement",
    "expected_agreements",
    "grid_counts",
    "pack",
    "pattern_of",
    "unpack",
]

_PAIRS_AT_ONCE = 1 << 18
"""Pairs whose seeds are counted at once (their temporary codes take 4 bytes a seed)."""
THREE = np.array([0, 1, 2, 2], dtype=np.int8)
"""Outcome class (A, B, T, other) -> the three classes of a pattern (A, B, other)."""
assert (CLASS_A, CLASS_B, CLASS_T, CLASS_OTHER) == (0, 1, 2, 3)


def grid_counts(classes: np.ndarray) -> np.ndarray:
    """Shape (pairs, 4, 4), int8: how many seeds of each pair have each (AB class, BA class)
    over the four outcome classes (A, B, T, other), from the pairs' (pairs, K, 2) grids."""
    n = len(classes)
    out = np.empty((n, 4, 4), dtype=np.int8)
    for lo in range(0, n, _PAIRS_AT_ONCE):
        part = classes[lo : lo + _PAIRS_AT_ONCE]
        types = part[:, :, 0].astype(np.int32) * 4 + part[:, :, 1]
        types += np.arange(0, 16 * len(part), 16, dtype=np.int32)[:, None]
        counts = np.bincount(types.ravel(), minlength=16 * len(part))
        out[lo : lo + _PAIRS_AT_ONCE] = counts.reshape(len(part), 4, 4)
    return out


def pattern_of(counts: np.ndarray) -> np.ndarray:
    """The (pairs, 3, 3) pattern of (pairs, 4, 4) grid counts: ties and other outcomes merged."""
    rows = counts[:, :3, :] + np.pad(counts[:, 3:, :], ((0, 0), (2, 0), (0, 0)))
    return rows[:, :, :3] + np.pad(rows[:, :, 3:], ((0, 0), (0, 0), (2, 0)))


def couple_counts(classes: np.ndarray) -> np.ndarray:
    """Shape (pairs, 3, 3): how many seeds of each pair have each couple type, from the
    pairs' (pairs, K, 2) grids of outcome classes."""
    return pattern_of(grid_counts(classes))


def pack(counts: np.ndarray, k: int) -> np.ndarray:
    """One int64 per pattern: its nine counts as digits in base K + 1 (17^9 < 2^63)."""
    digits = (k + 1) ** np.arange(9, dtype=np.int64)
    return counts.reshape(len(counts), 9).astype(np.int64) @ digits


def unpack(codes: np.ndarray, k: int) -> np.ndarray:
    """The (patterns, 3, 3) counts of packed codes."""
    digits = (k + 1) ** np.arange(9, dtype=np.int64)
    return (codes.astype(np.int64)[:, None] // digits % (k + 1)).reshape(len(codes), 3, 3)


def _seed_pair_weights(design: str, k: int) -> np.ndarray:
    """q[o, o']: P(two given distinct seeds take orders o and o') under the design."""
    if design == "common":
        return np.array([[0.5, 0.0], [0.0, 0.5]])
    if design == "independent":
        return np.full((2, 2), 0.25)
    if design == "balanced":
        half = k // 2
        same, crossed = half * (half - 1), half * half
        return np.array([[same, crossed], [crossed, same]]) / (k * (k - 1))
    raise ValueError(f"unknown design {design!r}")


def expected_agreement(counts: np.ndarray, design: str) -> np.ndarray:
    """Per pair of (pairs, 4, 4) grid counts (`grid_counts`), the expected mean over the
    C(K, 2) seed pairs of the reference of 1 if their two outcomes are equal and valid (both A,
    both B or both T)."""
    return expected_agreements(counts, [design])[0]


def expected_agreements(counts: np.ndarray, designs: Sequence[str]) -> np.ndarray:
    """Shape (designs, pairs): `expected_agreement` under each design.

    For distinct seeds s, s' taking orders o, o' with probability q[o, o'], the expected number
    of ordered seed pairs whose outcomes are both x is the sum over (o, o') of
    q[o, o'] (n_o(x) n_o'(x) - d_oo'(x)), where n_o(x) counts the seeds whose call in order o is
    x and d_oo'(x) the seeds counted in both (a seed never pairs with itself). The sums over x
    are exact integers, the same for every design: only the weights q differ.
    """
    k = int(counts[0].sum()) if len(counts) else 2
    # One row of counts per (AB class, BA class), pairs along the rows, so every sum adds
    # whole rows; int16 holds them (at most 3 K^2 <= 768).
    cells = counts.reshape(len(counts), 16).T.astype(np.int16)
    valid = [CLASS_A, CLASS_B, CLASS_T]
    held = [
        [cells[4 * x : 4 * x + 4].sum(axis=0, dtype=np.int16) for x in valid],  # AB: row x
        [cells[x::4].sum(axis=0, dtype=np.int16) for x in valid],  # BA: column x
    ]
    both = [cells[5 * x] for x in valid]
    ordered = {}
    for o, o2 in ((0, 0), (0, 1), (1, 1)):
        same = held[o] if o == o2 else both
        ordered[o, o2] = sum(h * h2 - d for h, h2, d in zip(held[o], held[o2], same, strict=True))
    ordered[1, 0] = ordered[0, 1]
    out = np.zeros((len(designs), len(counts)))
    for di, design in enumerate(designs):
        q = _seed_pair_weights(design, k)
        for o in (0, 1):
            for o2 in (0, 1):
                out[di] += q[o, o2] * ordered[o, o2]
    return out / (k * (k - 1))
