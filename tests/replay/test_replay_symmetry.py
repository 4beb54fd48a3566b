"""Replay engine: pairs with the same counts of couple types share every metric but agreement, which
lets the engine evaluate one pattern per such count (docs/design.md#exactness)."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from replay_literal import assignments

from schemas.vocabulary import DESIGNS, POLICIES
from tasks.replay.couples import couple_counts, expected_agreement, grid_counts, pack, unpack
from tasks.replay.designs import POLICY_DESIGNS, POLICY_METRICS, evaluate_patterns
from tasks.replay.engine import replay

CODES = np.array(["A", "B", "T", "X", "I", "M"])
CLASS = np.array([0, 1, 2, 3, 3, 3], dtype=np.int8)
"""Outcome code index -> class (as `tasks.replay.coded.OUTCOME_CLASS`)."""


def random_codes(rng: np.random.Generator, pairs: int, k: int) -> np.ndarray:
    """(pairs, K, 2) outcome code indices, all six codes, with many repeated couples."""
    return rng.choice(6, size=(pairs, k, 2), p=[0.3, 0.3, 0.1, 0.1, 0.1, 0.1])


def long_table(codes: np.ndarray, keys: np.ndarray) -> pa.Table:
    """The replay input of (pairs, K, 2) code grids, pair i named p0000i."""
    pairs, k, _ = codes.shape
    rows = np.repeat(np.arange(pairs), 2 * k)
    cells = np.tile(np.arange(2 * k), pairs)
    return pa.table(
        {
            "judge": pa.array(["judge"] * len(rows)),
            "config": pa.array(["cfg"] * len(rows)),
            "dataset": pa.array(["ds"] * len(rows)),
            "pair_id": pa.array([f"p{i:04d}" for i in rows]),
            "seed": pa.array(cells // 2, pa.int64()),
            "order": pa.array(np.array(["AB", "BA"])[cells % 2]),
            "outcome": pa.array(CODES[codes.reshape(-1)]),
            "key": pa.array(keys[rows], pa.string()),
        }
    )


@pytest.mark.parametrize("k", [2, 4, 16])
def test_a_pattern_is_the_counts_of_couple_types(k: int) -> None:
    rng = np.random.default_rng(k)
    classes = CLASS[random_codes(rng, 200, k)]
    counts = couple_counts(classes)
    assert counts.shape == (200, 3, 3) and (counts.sum(axis=(1, 2)) == k).all()
    # Seeds in another order, and a tie instead of another non-vote, give the same pattern.
    moved = np.stack([g[rng.permutation(k)] for g in classes])
    np.testing.assert_array_equal(couple_counts(moved), counts)
    np.testing.assert_array_equal(couple_counts(np.where(classes == 3, 2, classes)), counts)
    assert (couple_counts(classes[:, :, ::-1]) == counts.transpose(0, 2, 1)).all()
    np.testing.assert_array_equal(unpack(pack(counts, k), k), counts)
    every_seed_one_type = np.zeros((1, 3, 3), dtype=np.int64)
    every_seed_one_type[0, 2, 2] = k
    np.testing.assert_array_equal(unpack(pack(every_seed_one_type, k), k), every_seed_one_type)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_replay_equals_each_pair_evaluated_on_its_own_grid(k: int) -> None:
    """The engine's per-pair values (patterns shared by pairs) against each pair's own pattern
    evaluated alone, with all six outcome codes and keys A, B and none."""
    rng = np.random.default_rng(10 + k)
    pairs = 300
    codes = random_codes(rng, pairs, k)
    keys = rng.choice(np.array(["A", "B", None], dtype=object), pairs)
    result = replay(long_table(codes, keys), policies=POLICIES)
    replayed, design_rows = result.replay.to_pandas(), result.design.to_pandas()
    key_b = keys == "B"
    score = POLICY_METRICS.index("expected_score")
    for design in DESIGNS:
        policies = tuple(p for p in POLICIES if design in POLICY_DESIGNS[p])
        metrics = evaluate_patterns(couple_counts(CLASS[codes]), k, design, policies)
        for policy in policies:
            got = replayed[(replayed["design"] == design) & (replayed["policy"] == policy)]
            assert list(got["pair_id"]) == [f"p{i:04d}" for i in range(pairs)]
            own = metrics.policy[policy]
            for i, column in enumerate(POLICY_METRICS):
                want = np.where(key_b, 1.0 - own[:, i], own[:, i]) if i == score else own[:, i]
                np.testing.assert_allclose(got[column], want, rtol=0, atol=1e-12)
            reference = np.where(key_b, 1.0 - metrics.reference_score, metrics.reference_score)
            np.testing.assert_allclose(got["reference_score"], reference, rtol=0, atol=1e-12)
        rows = design_rows[design_rows["design"] == design]
        agreement = expected_agreement(grid_counts(CLASS[codes]), design)
        np.testing.assert_allclose(rows["expected_agreement"], agreement, rtol=0, atol=1e-12)
        np.testing.assert_allclose(rows["p_neutral"], metrics.p_neutral, rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [2, 4, 10, 12])
def test_expected_agreement_equals_every_assignment(k: int) -> None:
    """The closed form against the mean over every assignment of the design of the share of
    the reference's seed pairs whose outcomes are equal and valid."""
    rng = random.Random(k)
    grids = [
        [[rng.choice("ABTM") for _ in range(2)] for _ in range(k)],
        [[rng.choice("AAT") for _ in range(2)] for _ in range(k)],
    ]
    classes = np.array([[[list("ABTM").index(x) for x in seed] for seed in g] for g in grids])
    for design in DESIGNS:
        got = expected_agreement(grid_counts(classes.astype(np.int8)), design)
        for grid, value in zip(grids, got, strict=True):
            every = assignments(design, k)
            total = Fraction(0)
            for assignment in every:
                outcomes = [grid[s][o == "BA"] for s, o in enumerate(assignment)]
                same = [
                    outcomes[s] == outcomes[t] and outcomes[s] in "ABT"
                    for s, t in itertools.combinations(range(k), 2)
                ]
                total += Fraction(sum(same), len(same))
            assert value == pytest.approx(float(total / len(every)), abs=1e-12), design
