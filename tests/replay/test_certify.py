"""Certificates (docs/design.md#certificates): change ranges over every grid, the test's size
at the least favourable null, and the coverage of the shown bound."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from schemas.vocabulary import POLICIES
from tasks.replay.certify import (
    assignment_range,
    certification_order,
    change_law,
    change_range,
    log_wealth,
    pair_range,
    pairs_needed,
    upper_bound,
)
from tasks.replay.engine import replay

ALPHA = 0.05


def every_grid(k: int) -> pa.Table:
    """Every grid of outcome classes (A, B, tie) at K, up to the order of seeds."""
    couples = list(itertools.product("ABT", repeat=2))
    rows = []
    for p, grid in enumerate(itertools.combinations_with_replacement(couples, k)):
        for s, couple in enumerate(grid):
            for order, outcome in zip(("AB", "BA"), couple, strict=True):
                rows.append((f"p{p}", s, order, outcome))
    pair_id, seed, order, outcome = (list(c) for c in zip(*rows, strict=True))
    n = len(rows)
    return pa.table(
        {
            "judge": ["j"] * n, "config": ["c"] * n, "dataset": ["d"] * n, "pair_id": pair_id,
            "seed": pa.array(seed, pa.int64()), "order": order, "outcome": outcome,
            "key": pa.nulls(n, pa.string()),
        }
    )  # fmt: skip


@pytest.mark.parametrize("k", [2, 4, 6])
def test_the_change_range_bounds_every_pair_and_laws_are_shared(k: int) -> None:
    frame = replay(every_grid(k), designs=["balanced"], policies=POLICIES).replay.to_pandas()
    change = frame.pivot(index="pair_id", columns="policy", values="p_change")
    for policy in POLICIES:
        most = float(change_range(policy, k))
        assert change[policy].max() == pytest.approx(most, abs=1e-12), policy  # attained
        assert most <= assignment_range(policy, k)
        if most == 0.0:
            assert change[policy].abs().max() == 0.0, policy
    for a, b in itertools.combinations(POLICIES, 2):
        if change_law(a) == change_law(b):
            assert (change[a] - change[b]).abs().max() < 1e-12, (a, b)
    # A unanimous start of two couples begins with one of one couple: never more changes.
    assert (change["paired_unanimity_2"] <= change["paired_strict"] + 1e-12).all()
    assert (change["paired_strict"] <= change["paired_nonstrict"] + 1e-12).all()
    # Not nested, but on every grid so far nonstrict changes no more than paired_nonstrict
    # (the order of the fixed sequence; validity does not rest on it).
    assert (change["nonstrict"] <= change["paired_nonstrict"] + 1e-12).all() or k == 2


@pytest.mark.parametrize("k", [4, 6, 8, pytest.param(10, marks=pytest.mark.slow)])
def test_the_pair_ranges_are_the_exact_replay_of_every_pattern(k: int) -> None:
    """The table of per-pair ranges against the exact replay of every pattern at K (with
    ties: every grid over A, B and other, C(K + 8, 8) patterns)."""
    for policy in ("paired_strict", "paired_unanimity_2"):
        assert change_range(policy, k) == pair_range(policy, k), (policy, k)


def test_change_ranges_and_the_order_of_tests() -> None:
    # One assignment of paired_strict at K = 4 changes up to 1/2 of its decisions, a pair (an
    # average over its six balanced assignments) at most 1/3: the certificate's range.
    assert assignment_range("paired_strict", 4) == Fraction(1, 2)
    assert change_range("paired_strict", 4) == Fraction(1, 3)
    assert change_range("paired_strict", 6) == Fraction(2, 5)
    assert assignment_range("paired_strict", 6) == Fraction(4, 9)
    assert change_range("paired_unanimity_2", 6) == 0  # four equal votes of six: settled
    assert change_range("paired_unanimity_2", 8) == Fraction(1, 35)
    assert assignment_range("paired_unanimity_2", 8) == Fraction(1, 18)
    assert change_range("strict", 16) == change_range("full", 16) == 0
    assert change_range("nonstrict", 4) == change_range("nonstrict", 2) == 1
    assert change_range("paired_nonstrict", 2) == 0  # its one couple is the whole reference
    assert certification_order(list(POLICIES)) == [(2, False), (1, False), (0, False)] + [
        (0, True),
        (1, True),
    ]


def rejects(values: np.ndarray, budget: float) -> bool:
    return bool(log_wealth(values, np.array([budget]))[0] >= math.log(1 / ALPHA))


@pytest.mark.parametrize("n", [20, 50, 150, 600])
def test_the_test_holds_its_level_at_the_least_favourable_null(n: int) -> None:
    """Values at 0 or 1 with mean exactly the budget (Bernoulli, the worst case for a mean of
    values in [0, 1] near zero) and fractional values whose mean just exceeds it: the test of
    "mean >= budget" rejects in at most alpha of 600 samples, within three Monte Carlo
    standard errors."""
    rng = np.random.default_rng(n)
    slack = 3 * math.sqrt(ALPHA * (1 - ALPHA) / 600)
    for budget in (0.01, 0.04, 0.15):
        bernoulli = [rejects((rng.random(n) < budget).astype(float), budget) for _ in range(600)]
        spread = [  # a third of the mean from values of 1/3, the rest from values of 1/6 ...
            rejects(
                rng.choice([0.0, 1 / 6, 1 / 3], n, p=[1 - 5 * budget, 4 * budget, budget]), budget
            )
            for _ in range(600)
        ]  # ... (mean 4/6 b + 1/3 b = b), the shape of paired_strict's values at K = 4
        assert np.mean(bernoulli) <= ALPHA + slack, (budget, np.mean(bernoulli))
        assert np.mean(spread) <= ALPHA + slack, (budget, np.mean(spread))


@pytest.mark.slow
@pytest.mark.parametrize("n", [20, 50, 150, 600])
def test_the_shown_bound_covers_the_true_mean(n: int) -> None:
    """P(true mean > bound) <= alpha over 200 samples, for rare Bernoulli and rare fractional
    values (the bound is searched on a grid of nulls; its coverage is the claim)."""
    rng = np.random.default_rng(100 + n)
    slack = 3 * math.sqrt(ALPHA * (1 - ALPHA) / 200)
    for mean, draw in (
        (0.01, lambda: (rng.random(n) < 0.01).astype(float)),
        (0.012, lambda: rng.choice([0.0, 1 / 6, 1 / 3], n, p=[0.946, 0.036, 0.018])),
    ):
        missed = [
            upper_bound(draw(), scale=1.0, budget=0.01, alpha=ALPHA) < mean for _ in range(200)
        ]
        assert np.mean(missed) <= ALPHA + slack, (mean, np.mean(missed))


def test_bounds_and_pairs_needed_on_known_samples() -> None:
    zeros = np.zeros(300)
    bound = upper_bound(zeros, scale=0.5, budget=0.01, alpha=ALPHA)
    # All zeros: the wealth grows by 1 + 0.95 b / (1 - b) a pair, so the least null rejected
    # is about 0.5 * log 20 / (0.95 * 300) of the range, within the grid's step.
    assert 0.5 * 0.8 * math.log(20) / (0.95 * 300) < bound < 0.5 * 1.3 * math.log(20) / (0.95 * 300)
    assert upper_bound(np.ones(50), scale=1.0, budget=0.01, alpha=ALPHA) == 1.0
    assert upper_bound(zeros, scale=0.0, budget=0.01, alpha=ALPHA) == 0.0
    needed = pairs_needed(zeros, scale=0.5, budget=0.01, alpha=ALPHA)
    assert needed == math.ceil(math.log(20) / math.log1p(0.95 * 0.02 / 0.98))
    assert rejects(np.zeros(needed), 0.02) and not rejects(np.zeros(needed - 10), 0.02)
    assert pairs_needed(np.full(10, 0.3), scale=1.0, budget=0.2, alpha=ALPHA) is None
    assert pairs_needed(zeros, scale=0.01, budget=0.02, alpha=ALPHA) == 0
