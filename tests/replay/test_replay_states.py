"""How the designs' assignments spread over reference states, against every assignment enumerated
(docs/design.md#exactness), up to K = 16: the counts behind every replay metric."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from tasks.replay.family import side_counts
from tasks.replay.states import (
    ab_distribution,
    common_expectation,
    independent_expectation,
    side_expectation,
)


def random_patterns(rng: np.random.Generator, n: int, seeds: int) -> np.ndarray:
    """(n, 3, 3) couple counts of `seeds` seeds, types drawn from a lean per pattern."""
    out = np.zeros((n, 3, 3), dtype=np.int64)
    for i in range(n):
        types = rng.choice(9, size=seeds, p=rng.dirichlet(np.full(9, 0.7)))
        np.add.at(out[i].reshape(-1), types, 1)
    return out


def seeds_of(pattern: np.ndarray) -> np.ndarray:
    """(seeds, 2): the (AB class, BA class) of each seed of a pattern."""
    return np.array([(x, y) for x in range(3) for y in range(3) for _ in range(pattern[x, y])])


def state_counts(pattern: np.ndarray, on_ab: np.ndarray) -> tuple[np.ndarray, ...]:
    """(a1, b1, a2, b2) of every assignment (rows of `on_ab`, True where a seed is in AB)."""
    couples = seeds_of(pattern)
    first = np.where(on_ab, couples[:, 0], -1)
    second = np.where(~on_ab, couples[:, 1], -1)
    return (first == 0).sum(1), (first == 1).sum(1), (second == 0).sum(1), (second == 1).sum(1)


@pytest.mark.parametrize("k", [2, 4, 10, 12, 16])
def test_ab_states_equal_every_independent_and_common_assignment(k: int) -> None:
    rng = np.random.default_rng(k)
    patterns = random_patterns(rng, 6, k)
    table = rng.random(((k + 1) ** 2, 3))
    every = np.array(list(itertools.product([True, False], repeat=k)))
    for pattern, ind, com, dist in zip(
        patterns,
        independent_expectation(patterns, k, table),
        common_expectation(patterns, k, table),
        ab_distribution(patterns, k),
        strict=True,
    ):
        a1, b1, a2, b2 = state_counts(pattern, every)
        index = (a1 + a2) * (k + 1) + b1 + b2
        np.testing.assert_allclose(ind, table[index].mean(axis=0), rtol=0, atol=1e-12)
        # The distribution is exact: dyadic, every count over 2^K.
        np.testing.assert_array_equal(dist, np.bincount(index, minlength=(k + 1) ** 2) / 2**k)
        alike = every.all(axis=1) | (~every).all(axis=1)
        np.testing.assert_allclose(com, table[index[alike]].mean(axis=0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [2, 4, 6, 10, 12, 16])
@pytest.mark.parametrize("shape", ["reference", "without one AB seed", "without one BA seed"])
def test_side_states_equal_every_balanced_assignment(k: int, shape: str) -> None:
    """The balanced design's (AB side, BA side) states, and those of the K - 1 other seeds once
    one seed is put in AB (money's send probabilities), or in BA."""
    seeds, side = {"reference": (k, k // 2), "without one AB seed": (k - 1, k // 2 - 1)}.get(
        shape, (k - 1, k // 2)
    )
    rng = np.random.default_rng(100 + k)
    patterns = random_patterns(rng, 5, seeds)
    first, second = side_counts(side), side_counts(seeds - side)
    position = {tuple(s): i for i, s in enumerate(first.tolist())}
    position2 = {tuple(s): i for i, s in enumerate(second.tolist())}
    table = rng.random((len(first), len(second), 2))
    identity = np.eye(len(first) * len(second)).reshape(len(first), len(second), -1)
    got = side_expectation(patterns, k, side, table)
    shares = side_expectation(patterns, k, side, identity)
    subsets = list(itertools.combinations(range(seeds), side))
    on_ab = np.zeros((len(subsets), seeds), dtype=bool)
    for row, chosen in enumerate(subsets):
        on_ab[row, list(chosen)] = True
    for pattern, value, share in zip(patterns, got, shares, strict=True):
        a1, b1, a2, b2 = state_counts(pattern, on_ab)
        s1 = np.array([position[(a, b)] for a, b in zip(a1, b1, strict=True)])
        s2 = np.array([position2[(a, b)] for a, b in zip(a2, b2, strict=True)])
        np.testing.assert_allclose(value, table[s1, s2].mean(axis=0), rtol=0, atol=1e-12)
        # Exact counts: each state's share is its count of assignments over C(seeds, side).
        counts = np.bincount(s1 * len(second) + s2, minlength=len(first) * len(second))
        np.testing.assert_array_equal(share, counts / comb(seeds, side))
