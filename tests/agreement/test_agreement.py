"""Agreement statistics: published worked examples, a literal computation on runs with missing
calls, and the tables a run's outcomes give."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pandas as pd
import pytest

from tasks.agreement.stats import (
    across_features,
    alpha_from_sums,
    cohen_features,
    cohen_from_sums,
    decision_agreement,
    estimate,
    fleiss_from_sums,
    unit_features,
)
from tasks.agreement.tables import judge_agreement, key_confusion, self_agreement

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 observers x
# 12 units, values 1..5, None missing. Published nominal alpha: 0.743.
KRIPPENDORFF = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
# Fleiss (1971) as worked on Wikipedia ("Fleiss' kappa", worked example): 10 subjects, 14
# raters, 5 categories; published kappa 0.210.
FLEISS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_krippendorff_published_example() -> None:
    counts = np.zeros((12, 5))
    for observer in KRIPPENDORFF:
        for unit, value in enumerate(observer):
            if value is not None:
                counts[unit, value - 1] += 1
    alpha = float(alpha_from_sums(unit_features(counts).sum(axis=0)))
    assert round(alpha, 3) == 0.743


def test_fleiss_published_example() -> None:
    kappa = float(fleiss_from_sums(unit_features(np.array(FLEISS)).sum(axis=0)))
    assert round(kappa, 3) == 0.210


def test_interval_brackets_the_estimate_and_is_reproducible() -> None:
    features = unit_features(np.array(FLEISS))
    first = estimate(features, fleiss_from_sums, seed_parts=("x",))
    assert first.low < first.value < first.high
    assert estimate(features, fleiss_from_sums, seed_parts=("x",)) == first


def test_one_category_is_undefined() -> None:
    est = estimate(unit_features(np.array([[3, 0], [2, 0]])), alpha_from_sums, seed_parts=())
    assert np.isnan(est.value) and np.isnan(est.low)


# --- A literal computation, written from the definitions, on outcomes with missing calls.

VALUES = ("A", "B", "T", "X")


def literal_alpha(units: list[list[tuple[str, str]]], couples: str) -> float:
    """Krippendorff's alpha from the coincidence matrix, built pair of values by pair of
    values: `couples` "all" (every two values of a unit, weight 1 / (m - 1)), "within" (a
    unit per order) or "across" (one value of each order, weight (m1 + m2) / (2 m1 m2))."""
    coincidence = {(c, k): 0.0 for c in VALUES for k in VALUES}
    for unit in units:
        values = [(o, v) for o, v in unit if v in VALUES]
        if couples == "within":
            groups = [[(o, v) for o, v in values if o == side] for side in ("AB", "BA")]
        else:
            groups = [values]
        for group in groups:
            m = len(group)
            m1 = sum(o == "AB" for o, _ in group)
            m2 = m - m1
            for (o1, v1), (o2, v2) in permutations(group, 2):
                if couples == "across":
                    if o1 == o2 or m1 == 0 or m2 == 0:
                        continue
                    coincidence[(v1, v2)] += (m1 + m2) / (2 * m1 * m2)
                else:
                    coincidence[(v1, v2)] += 1 / (m - 1)
    n_c = {c: sum(coincidence[(c, k)] for k in VALUES) for c in VALUES}
    n = sum(n_c.values())
    observed = sum(coincidence[(c, k)] for c in VALUES for k in VALUES if c != k)
    expected = sum(n_c[c] * n_c[k] for c in VALUES for k in VALUES if c != k) / (n - 1)
    return 1 - observed / expected


def literal_fleiss(units: list[list[tuple[str, str]]]) -> float:
    """Fleiss' kappa over units with two values or more: mean share of agreeing ordered
    pairs of values against the chance share from the pooled proportions."""
    shares, pooled = [], {c: 0 for c in VALUES}
    for unit in units:
        values = [v for _, v in unit if v in VALUES]
        if len(values) < 2:
            continue
        same = sum(a == b for a, b in permutations(values, 2))
        shares.append(same / (len(values) * (len(values) - 1)))
        for v in values:
            pooled[v] += 1
    total = sum(pooled.values())
    chance = sum((x / total) ** 2 for x in pooled.values())
    return (sum(shares) / len(shares) - chance) / (1 - chance)


def random_outcomes(rng: np.random.Generator, configs: int, pairs: int, k: int) -> pd.DataFrame:
    """Outcomes of `configs` judge configs with ties, abstentions, invalid and missing calls
    and a left-slot bias in some of them."""
    rows = []
    for c in range(configs):
        bias = 0.3 * c
        for p in range(pairs):
            lean = rng.uniform()
            key = rng.choice(["A", "B", None])
            for seed in range(k):
                for order in ("AB", "BA"):
                    a = np.clip(lean + (bias if order == "AB" else -bias), 0, 1) * 0.8
                    probs = [a, 0.8 - a, 0.08, 0.04, 0.04, 0.04]
                    outcome = rng.choice(["A", "B", "T", "X", "I", "M"], p=probs)
                    rows.append(
                        {
                            "judge": "j",
                            "config": f"c{c}",
                            "dataset": "d",
                            "pair_id": f"p{p:03d}",
                            "seed": seed,
                            "order": order,
                            "outcome": outcome,
                            "key": key,
                        }
                    )
    return pd.DataFrame(rows)


def test_self_agreement_equals_literal_computation_with_missing_calls() -> None:
    outcomes = random_outcomes(np.random.default_rng(7), configs=2, pairs=40, k=4)
    table = self_agreement(outcomes).set_index(["config", "statistic", "scope"]).sort_index()
    for config, group in outcomes.groupby("config"):
        units = [
            list(zip(pair["order"], pair["outcome"], strict=True))
            for _, pair in group.groupby("pair_id")
        ]
        for scope in ("all", "within", "across"):
            got = table.loc[(config, "alpha", scope), "value"]
            assert got == pytest.approx(literal_alpha(units, scope), abs=1e-12)
        assert table.loc[(config, "fleiss_kappa", "all"), "value"] == pytest.approx(
            literal_fleiss(units), abs=1e-12
        )
        within = [[(o, v) for o, v in u if o == side] for u in units for side in ("AB", "BA")]
        assert table.loc[(config, "fleiss_kappa", "within"), "value"] == pytest.approx(
            literal_fleiss(within), abs=1e-12
        )
    # position bias: the biased config agrees less across orders than within one
    across, within = (table.loc[("c1", "alpha", s), "value"] for s in ("across", "within"))
    assert across < within


def test_across_orders_of_one_call_each_is_two_coder_alpha() -> None:
    first = np.array([[1, 0], [0, 1], [1, 0], [1, 0]])
    second = np.array([[1, 0], [1, 0], [0, 1], [1, 0]])
    across = alpha_from_sums(across_features(first, second).sum(axis=0))
    assert across == pytest.approx(alpha_from_sums(unit_features(first + second).sum(axis=0)))


def literal_cohen(first: list[str], second: list[str]) -> float:
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    chance = sum((first.count(c) / n) * (second.count(c) / n) for c in ("A", "B", "N"))
    return (observed - chance) / (1 - chance)


def test_judge_agreement_and_confusion_from_outcomes() -> None:
    outcomes = random_outcomes(np.random.default_rng(11), configs=3, pairs=30, k=2)
    outcomes = outcomes[~((outcomes.config == "c2") & (outcomes.pair_id == "p000"))]
    table = judge_agreement(outcomes)
    assert len(table) == 3  # every two of three configs

    def decisions(config: str) -> dict[str, str]:
        out = {}
        for pair_id, group in outcomes[outcomes.config == config].groupby("pair_id"):
            a, b = (group.outcome == "A").sum(), (group.outcome == "B").sum()
            out[pair_id] = "A" if a > b else "B" if b > a else "N"
        return out

    for row in table.itertuples():
        one, two = decisions(row.config_1), decisions(row.config_2)
        shared = sorted(set(one) & set(two))
        assert row.pairs == len(shared)
        assert row.kappa == pytest.approx(
            literal_cohen([one[p] for p in shared], [two[p] for p in shared]), abs=1e-12
        )
        raw = np.mean([one[p] == two[p] for p in shared])
        assert row.raw == pytest.approx(raw) and row.raw_low <= raw <= row.raw_high

    confusion = key_confusion(outcomes).set_index(["config", "key", "decision"])["pairs"]
    c0 = outcomes[outcomes.config == "c0"].groupby("pair_id")
    keys = c0.key.first().fillna("none")
    made = decisions("c0")
    for key in ("A", "B", "none"):
        decided = [made[p] for p in keys.index if keys[p] == key]
        assert confusion.loc[("c0", key, "A")] == decided.count("A")
        assert confusion.loc[("c0", key, "B")] == decided.count("B")
        assert confusion.loc[("c0", key, "tie")] + confusion.loc[
            ("c0", key, "none")
        ] == decided.count("N")
    assert confusion.groupby(level=0).sum().loc["c0"] == 30


def test_cohen_features_match_literal() -> None:
    first, second = np.array([0, 1, 2, 0, 0, 1]), np.array([0, 1, 1, 0, 2, 1])
    kappa = cohen_from_sums(cohen_features(first, second, 3).sum(axis=0))
    names = np.array(["A", "B", "N"])
    assert kappa == pytest.approx(literal_cohen(list(names[first]), list(names[second])))


def test_decision_agreement_counts_only_pairs_both_judged() -> None:
    first = np.array([0, -1, 1, 2, 0, 1, -1, 2])
    second = np.array([0, 1, 1, -1, 2, 1, -1, 2])
    pairs, kappa, raw = decision_agreement(first, second, seed_parts=("x",))
    assert pairs == 5  # units 0, 2, 4, 5, 7
    names = np.array(["A", "B", "N"])
    both = [0, 2, 4, 5, 7]
    assert kappa.value == pytest.approx(
        literal_cohen(list(names[first[both]]), list(names[second[both]]))
    )
    assert raw.value == pytest.approx(4 / 5) and raw.low <= 0.8 <= raw.high
