"""Replay engine: every metric is invariant under permuting a pair's seeds, which lets the engine
evaluate one pattern per grid up to that permutation (docs/design.md#exactness)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from schemas.vocabulary import DESIGNS, POLICIES
from tasks.replay.designs import POLICY_DESIGNS, POLICY_METRICS, evaluate_patterns
from tasks.replay.engine import replay

CODES = np.array(["A", "B", "T", "X", "I", "M"])
CLASS = np.array([0, 1, 2, 3, 3, 3], dtype=np.int8)
"""Outcome code index -> class (as `tasks.replay.coded.OUTCOME_CLASS`)."""


def random_codes(rng: np.random.Generator, pairs: int, k: int) -> np.ndarray:
    """(pairs, K, 2) outcome code indices, all six codes, with many repeated couples."""
    return rng.choice(6, size=(pairs, k, 2), p=[0.3, 0.3, 0.1, 0.1, 0.1, 0.1])


@pytest.mark.parametrize("k", [2, 4, 6])
@pytest.mark.parametrize("design", DESIGNS)
def test_metrics_do_not_depend_on_the_order_of_seeds(k: int, design: str) -> None:
    rng = np.random.default_rng(k)
    patterns = CLASS[random_codes(rng, 300, k)]
    permuted = np.stack([p[rng.permutation(k)] for p in patterns])
    assert not np.array_equal(permuted, patterns)
    policies = tuple(p for p in POLICIES if design in POLICY_DESIGNS[p])
    one = evaluate_patterns(patterns, design, policies)
    other = evaluate_patterns(permuted, design, policies)
    for name in ("reference_score", "p_neutral", "expected_agreement", "component_agreement"):
        np.testing.assert_allclose(getattr(other, name), getattr(one, name), rtol=0, atol=1e-12)
    for policy in policies:
        np.testing.assert_allclose(other.policy[policy], one.policy[policy], rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [2, 4])
def test_replay_equals_each_pair_evaluated_on_its_own_grid(k: int) -> None:
    """The engine's per-pair values (patterns shared up to seed order) against each pair's own
    grid evaluated as it stands, with all six outcome codes and keys A, B and none."""
    rng = np.random.default_rng(10 + k)
    pairs = 400
    codes = random_codes(rng, pairs, k)
    keys = rng.choice(np.array(["A", "B", None], dtype=object), pairs)
    rows = np.repeat(np.arange(pairs), 2 * k)
    cells = np.tile(np.arange(2 * k), pairs)
    table = pa.table(
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
    result = replay(table, policies=POLICIES).replay.to_pandas()
    key_b = keys == "B"
    score = POLICY_METRICS.index("expected_score")
    for design in DESIGNS:
        policies = tuple(p for p in POLICIES if design in POLICY_DESIGNS[p])
        metrics = evaluate_patterns(CLASS[codes], design, policies)
        for policy in policies:
            got = result[(result["design"] == design) & (result["policy"] == policy)]
            assert list(got["pair_id"]) == [f"p{i:04d}" for i in range(pairs)]
            own = metrics.policy[policy]
            for i, column in enumerate(POLICY_METRICS):
                want = np.where(key_b, 1.0 - own[:, i], own[:, i]) if i == score else own[:, i]
                np.testing.assert_allclose(got[column], want, rtol=0, atol=1e-12)
            reference = np.where(key_b, 1.0 - metrics.reference_score, metrics.reference_score)
            np.testing.assert_allclose(got["reference_score"], reference, rtol=0, atol=1e-12)
