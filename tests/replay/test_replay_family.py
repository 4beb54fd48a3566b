"""Every policy, core and paired family, against a literal enumeration in exact fractions.

The reference (tests/replay_literal.py) follows docs/design.md#stopping-policies and
docs/design.md#paired-family word for word: it enumerates every assignment of the design,
every arrangement of the calls that run in random order and, for the paired policies, every
perfect matching x couple order.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pyarrow as pa
import pytest
from replay_literal import RULES, Law, decide, paired, paired_every_order, references, sequential

from schemas.vocabulary import POLICIES
from tasks.replay.engine import replay


def expect(grid: dict, k: int, design: str, policy: str) -> dict[str, Fraction]:
    """The per-pair policy metrics (A-scores: the tables use no key)."""
    a_score = {"A": Fraction(1), "B": Fraction(0), "N": Fraction(1, 2)}
    names = ("expected_calls", "p_change", "p_neutral_to_decisive", "p_decisive_to_neutral")
    sums = dict.fromkeys((*names, "p_reversal", "expected_score", "added_variance"), Fraction(0))
    for w, ab, ba in references(grid, k, design):
        outcomes = tuple(sorted(ab + ba))
        full = decide(outcomes)
        if policy == "full":
            law: Law = ((Fraction(1), full, k),)
        elif policy in RULES:
            law = paired(ab, ba, *RULES[policy])
        else:
            law = sequential(outcomes, policy)
        mean = sum(p * a_score[d] for p, d, _ in law)
        sums["expected_calls"] += w * sum(p * c for p, _, c in law)
        sums["p_change"] += w * sum(p for p, d, _ in law if d != full)
        sums["p_neutral_to_decisive"] += w * sum(p for p, d, _ in law if full == "N" != d)
        sums["p_decisive_to_neutral"] += w * sum(p for p, d, _ in law if full != "N" == d)
        sums["p_reversal"] += w * sum(p for p, d, _ in law if {d, full} == {"A", "B"})
        sums["expected_score"] += w * mean
        sums["added_variance"] += w * sum(p * (a_score[d] - mean) ** 2 for p, d, _ in law)
    return sums


LEANS = ["ABTXIM", "AAABTM", "BBBAXI", "AB", "AAB", "ABBI"]


def random_grids(
    rng: random.Random, spec: list[tuple[int, int]], leans: list[str] = LEANS
) -> tuple[pa.Table, dict]:
    """Random outcome grids; `spec` is (K, pairs). The first pair of each K draws from the
    first of `leans`, the others from any."""
    rows, grids = [], {}
    for k, n in spec:
        for p in range(n):
            lean = leans[0] if p == 0 else rng.choice(leans)
            grid = {(s, o): rng.choice(lean) for s in range(k) for o in ("AB", "BA")}
            grids[(f"k{k}", f"p{p}")] = (grid, k)
            for (s, o), outcome in grid.items():
                rows.append(
                    {
                        "judge": f"k{k}",
                        "config": "cfg",
                        "dataset": "ds",
                        "pair_id": f"p{p}",
                        "seed": s,
                        "order": o,
                        "outcome": outcome,
                        "key": None,
                    }
                )
    return pa.Table.from_pylist(rows, schema=_SCHEMA), grids


_SCHEMA = pa.schema(
    [(n, pa.string()) for n in ("judge", "config", "dataset", "pair_id")]
    + [("seed", pa.int64())]
    + [(n, pa.string()) for n in ("order", "outcome", "key")]
)


def _check(
    spec: list[tuple[int, int]], designs: tuple[str, ...], seed: int, leans: list[str] = LEANS
) -> None:
    table, grids = random_grids(random.Random(seed), spec, leans)
    assert set(table["outcome"].to_pylist()) == set("".join(leans))
    result = replay(table, designs=designs, policies=POLICIES)
    rows = result.replay.to_pylist()
    got = {(r["judge"], r["pair_id"], r["design"], r["policy"]): r for r in rows}
    checked = 0
    for (judge, pair_id), (grid, k) in grids.items():
        for (j, p, design, policy), row in got.items():
            if (j, p) != (judge, pair_id):
                continue
            for name, value in expect(grid, k, design, policy).items():
                assert row[name] == pytest.approx(float(value), abs=1e-12), (
                    judge,
                    pair_id,
                    design,
                    policy,
                    name,
                )
                checked += 1
    assert checked == sum(n for _, n in spec) * 7 * (3 * len(designs) + 4 * ("balanced" in designs))


def test_every_policy_matches_literal_enumeration_k2_to_k6() -> None:
    _check([(2, 6), (4, 14), (6, 4)], ("common", "independent", "balanced"), seed=3)


@pytest.mark.slow
def test_every_policy_matches_literal_enumeration_k8() -> None:
    _check([(8, 2)], ("common", "independent", "balanced"), seed=5)


@pytest.mark.slow
def test_every_policy_matches_literal_enumeration_k10_k12() -> None:
    """A few pairs whose outcomes have few kinds (the reference enumerates their arrangements)."""
    leans = ["ABBT", "AB", "AAAB", "AAAAAAM"]
    _check([(10, 2), (12, 2)], ("common", "independent", "balanced"), seed=10, leans=leans)


@pytest.mark.parametrize("k", [2, 4, 6])
def test_literal_matchings_as_arrangements_equal_every_permutation(k: int) -> None:
    """The reference's shortcut for matchings and couple orders against every permutation of
    the BA calls and every order of the couples."""
    rng = random.Random(k)
    for _ in range(4):
        ab = tuple(sorted(rng.choice("ABT") for _ in range(k // 2)))
        ba = tuple(sorted(rng.choice("ABM") for _ in range(k // 2)))
        for couples, boundary in RULES.values():
            fast = sorted(paired(ab, ba, couples, boundary), key=lambda r: (r[1], r[2]))
            slow = sorted(paired_every_order(ab, ba, couples, boundary), key=lambda r: (r[1], r[2]))
            assert fast == slow, (ab, ba, couples, boundary)


def _one_pair(k: int, grid: dict[tuple[int, str], str]) -> pa.Table:
    rows = [
        {"judge": "j", "config": "c", "dataset": "d", "pair_id": "p", "seed": s, "order": o,
         "outcome": grid[(s, o)], "key": None}
        for s in range(k) for o in ("AB", "BA")
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=_SCHEMA)


def _policy_rows(table: pa.Table) -> dict[str, dict]:
    result = replay(table, designs=("balanced",), policies=POLICIES)
    return {r["policy"]: r for r in result.replay.to_pylist()}


def test_the_boundary_is_checked_right_after_the_paired_start() -> None:
    """docs/design.md#paired-family: after the first m couples, if they are not unanimous,
    the boundary is checked at once (t = 2m) before another call runs. At K = 4 no start that
    is not unanimous can meet it (margin <= 2m - 1 = 1 < K - 2 = 2); at K = 6 the two couples
    of paired_unanimity_2 can (3 A and a tie: margin 3 > 6 - 4)."""
    # K = 4: every seed A in both orders but one tie seed. paired_strict's first couple holds
    # the tie with probability 1/2 (then one more A settles it: 3 calls), else stops at 2.
    k4 = {(s, o): "A" if s < 3 else "T" for s in range(4) for o in ("AB", "BA")}
    rows = _policy_rows(_one_pair(4, k4))
    assert rows["paired_strict"]["expected_calls"] == pytest.approx(2.5, abs=1e-12)
    assert rows["paired_unanimity_2"]["expected_calls"] == pytest.approx(4.0, abs=1e-12)
    # K = 6, same shape: the two couples are unanimous (4 calls) or hold the tie (3 A and T,
    # margin 3 > 2 calls left: settled, stop at 4 as well). Never a fifth call.
    k6 = {(s, o): "A" if s < 5 else "T" for s in range(6) for o in ("AB", "BA")}
    rows = _policy_rows(_one_pair(6, k6))
    assert rows["paired_unanimity_2"]["expected_calls"] == pytest.approx(4.0, abs=1e-12)
    assert rows["paired_unanimity_2"]["p_change"] == 0.0
    assert expect(k6, 6, "balanced", "paired_unanimity_2")["expected_calls"] == 4
