"""What holds at which K (docs/design.md#scope-of-the-half-bound): each statement scoped to K
is checked at the K it names, for single grids and for whole judges."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from support import persona_grids, persona_laws

from schemas.vocabulary import POLICIES
from simjudge.persona import PRESETS
from tasks.replay.certify import assignment_range, change_range, log_wealth
from tasks.replay.designs import evaluate_patterns
from tasks.replay.engine import replay
from tasks.replay.scope import all_patterns, judge_rates, scope_notes

STRONG = next(p for p in PRESETS if p.name == "strong")


def grid(couples: str) -> pa.Table:
    """One pair's grid from its seeds written as (`AB` outcome, `BA` outcome)."""
    rows = [
        (s, order, outcome)
        for s, couple in enumerate(couples.split())
        for order, outcome in zip(("AB", "BA"), couple, strict=True)
    ]
    n = len(rows)
    return pa.table(
        {
            "judge": ["j"] * n, "config": ["c"] * n, "dataset": ["d"] * n, "pair_id": ["p"] * n,
            "seed": pa.array([r[0] for r in rows], pa.int64()), "order": [r[1] for r in rows],
            "outcome": [r[2] for r in rows], "key": pa.nulls(n, pa.string()),
        }
    )  # fmt: skip


def per_policy(table: pa.Table) -> dict[str, dict]:
    rows = replay(table, designs=["balanced"], policies=POLICIES).replay.to_pylist()
    return {r["policy"]: r for r in rows}


def test_whole_judges_paired_unanimity_changes_more_than_nonstrict_from_k_6() -> None:
    """The simulated strong judge at high reasoning: paired unanimity changes a third of what
    nonstrict changes at K = 4, 1.4 times as much at K = 6 and 7.7 times at K = 8, and from
    K = 6 all of its excess is reversals, which nonstrict never makes."""
    ab, ba = persona_laws(STRONG, "high")
    ratios = {}
    for k in (4, 6, 8):
        rates = judge_rates(ab, ba, k, ("nonstrict", "paired_unanimity"))
        ratios[k] = rates["paired_unanimity"]["p_change"] / rates["nonstrict"]["p_change"]
        assert rates["nonstrict"]["p_reversal"] == 0.0
        assert (rates["paired_unanimity"]["p_reversal"] > 0) == (k >= 6)
    assert ratios[4] < 0.5
    assert round(ratios[6], 1) == 1.4 and round(ratios[8], 1) == 7.7


def test_whole_judge_rates_match_a_large_sample() -> None:
    """The exact whole-judge rate against the mean over 20,000 sampled pairs (four standard
    errors): the pattern law is the one the sampled grids follow."""
    ab, ba = persona_laws(STRONG, "high")
    exact = judge_rates(ab, ba, 6, ("nonstrict", "paired_unanimity"))
    table = persona_grids([(STRONG, "high")], pairs=20_000, k=6, seed=4)
    rows = replay(table, designs=["balanced"], policies=["nonstrict", "paired_unanimity"])
    frame = rows.replay.to_pandas()
    for policy, values in frame.groupby("policy", observed=True)["p_change"]:
        error = values.std() / math.sqrt(len(values))
        assert abs(values.mean() - exact[str(policy)]["p_change"]) < 4 * error, policy


def test_paired_unanimity_2_reverses_from_k_10() -> None:
    """K = 10, seeds AA AA AA AA BB BB BB BB BB BB: the reference has four A seeds and six B
    seeds, so A wins only on an assignment and couples where A is outvoted; paired_unanimity_2
    stops on two A couples with probability 1/210, all of it a reversal. Below K = 10 it
    reverses nothing on any grid."""
    rows = per_policy(grid("AA AA AA AA BB BB BB BB BB BB"))
    assert rows["paired_unanimity_2"]["p_reversal"] == pytest.approx(1 / 210, abs=1e-12)
    assert rows["nonstrict"]["p_reversal"] == 0.0
    for k in (4, 6, 8):
        metrics = evaluate_patterns(all_patterns(k), k, "balanced", ("paired_unanimity_2",))
        assert metrics.policy["paired_unanimity_2"][:, 4].max() == 0.0, k


def test_paired_nonstrict_stops_earliest_within_the_paired_family_only() -> None:
    """A judge that always picks the right slot at K = 4: nonstrict runs 8/3 calls,
    paired_nonstrict 3 (its couple always splits). Within the paired family it runs no more
    calls than paired_strict or paired_unanimity on any grid at K = 4 and 6."""
    rows = per_policy(grid("BA BA BA BA"))
    assert rows["nonstrict"]["expected_calls"] == pytest.approx(8 / 3, abs=1e-12)
    assert rows["paired_nonstrict"]["expected_calls"] == pytest.approx(3.0, abs=1e-12)
    family = ("paired_nonstrict", "paired_strict", "paired_unanimity")
    for k in (4, 6):
        calls = evaluate_patterns(all_patterns(k), k, "balanced", family).policy
        assert (calls["paired_nonstrict"][:, 0] <= calls["paired_strict"][:, 0] + 1e-12).all()
        assert (calls["paired_strict"][:, 0] <= calls["paired_unanimity"][:, 0] + 1e-12).all()


def least_pairs(budget: float, scale: float) -> int:
    """The least n of pairs that change nothing whose test certifies `budget`."""
    n = 1
    while log_wealth(np.zeros(n), np.array([budget / scale]))[0] < math.log(20):
        n += 1
    return n


def test_pairs_needed_with_no_change_observed_at_1_percent() -> None:
    """With the range of one assignment (1/2 at K = 4) 157 pairs, 5.4% above the binomial
    bound (149) no test valid on [0, R] can beat; with the range of one pair (1/3), 104
    against 99."""
    for scale, pairs, binomial in ((assignment_range, 157, 149), (change_range, 104, 99)):
        r = float(scale("paired_strict", 4))
        b = 0.01 / r
        assert least_pairs(0.01, r) == pairs
        assert math.ceil(math.log(20) / -math.log1p(-b)) == binomial


def test_match_cost_is_filled_for_every_policy_but_full() -> None:
    table = persona_grids([(p, "low") for p in PRESETS], pairs=200, k=4, seed=6)
    summary = replay(table, designs=["balanced"], policies=POLICIES).summary.to_pandas()
    filled = summary.set_index(["judge", "policy"])["match_cost"].notna()
    for (_, policy), has in filled.items():
        assert has == (policy != "full"), policy


def test_scope_notes_follow_the_run_k() -> None:
    assert scope_notes([2, 4]) == {}
    at_6 = scope_notes([6])
    assert set(at_6) == {"paired_unanimity", "paired_strict", "paired_nonstrict"}
    assert "1/210" in scope_notes([4, 10])["paired_unanimity_2"]
