"""The advisor (docs/design.md#advice): certificates, refusals, the fixed sequence, coverage."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from support import advice_coverage, persona_grids

from schemas.vocabulary import POLICIES
from simjudge.persona import PRESETS, Persona
from tasks.errors import InputError
from tasks.replay.advisor import advise

PERSONAS = {p.name: p for p in PRESETS}
CHANGING = ("nonstrict", "paired_unanimity", "paired_nonstrict", "paired_strict")
"""The policies that can change a decision at K = 4."""


def by_policy(advice: pa.Table, judge: str | None = None) -> dict[str, dict]:
    rows = advice.to_pylist()
    return {r["policy"]: r for r in rows if judge is None or r["judge"] == judge}


def unanimous(pairs: int, k: int = 4) -> pa.Table:
    """A judge that gives the key in every call: no policy changes any decision."""
    sure = Persona(name="sure", skill=1.0)
    return persona_grids([(sure, None)], pairs=pairs, k=k, seed=1)


def test_on_20_pairs_every_decision_changing_policy_is_refused_at_1_percent() -> None:
    """Even a judge that never changes a decision cannot be certified within 1% on 20 pairs:
    no policy changes a decision on them, yet the true rate could still exceed 1%."""
    tables = [unanimous(20), persona_grids([(p, "high") for p in PRESETS], pairs=20, k=4, seed=3)]
    for table in tables:
        advice = advise(table, max_change=0.01)
        for row in advice.to_pylist():
            if row["policy"] in CHANGING:
                assert row["certificate"] in ("over", "untested"), row
                assert row["change_bound"] > 0.01
                assert row["rank"] != "advised"
            else:
                assert row["certificate"] == "construction" and row["change_bound"] == 0.0
        for advised in (r for r in advice.to_pylist() if r["rank"] == "advised"):
            assert advised["policy"] == "strict"
            assert "No policy that saves more is certified" in advised["note"]
    # The reason names how many pairs would certify the best candidate at this budget.
    sure = by_policy(advise(unanimous(20), max_change=0.01))
    candidate = next(r for r in sure.values() if r["rank"] == "candidate")
    assert candidate["change"] == 0.0 and candidate["pairs_needed"] > 20
    assert f"about {candidate['pairs_needed']} pairs changing" in sure["strict"]["note"]


def test_enough_pairs_certify_and_the_bound_holds_the_budget() -> None:
    """104 unanimous pairs certify paired_strict within 1% (no pair changes more than 1/3 of
    its decisions at K = 4, so n >= log 20 / log(1 + 0.95 * 0.03 / 0.97), about 103.4; with
    the range of one assignment, 1/2, it took 157), and the advised bound is within it."""
    advice = by_policy(advise(unanimous(104), max_change=0.01))
    advised = next(r for r in advice.values() if r["rank"] == "advised")
    assert advised["policy"] in CHANGING and advised["certificate"] == "certified"
    assert advised["change_bound"] <= 0.01 and advised["savings"] == pytest.approx(0.5)
    assert advice["paired_strict"]["certificate"] == "certified"
    assert advice["paired_strict"]["change_range"] == pytest.approx(1 / 3)
    fewer = by_policy(advise(unanimous(103), max_change=0.01))
    assert fewer["paired_strict"]["certificate"] == "over"
    assert fewer["paired_strict"]["pairs_needed"] == 104


def test_a_policy_whose_bound_is_over_the_budget_is_never_advised() -> None:
    """Where a policy's observed change is within the budget but its bound is not, it is the
    candidate, never the advice; whatever is advised holds its bound within the budget."""
    refused = 0
    for seed in range(24):
        table = persona_grids([(PERSONAS["strong"], "high")], pairs=60, k=4, seed=seed)
        for row in advise(table, max_change=0.02).to_pylist():
            if row["rank"] == "advised":
                assert row["certificate"] in ("certified", "construction")
                assert row["change_bound"] <= 0.02
            if row["certificate"] == "over" and row["change"] <= 0.02:
                assert row["rank"] in ("candidate", "other")
                assert row["change_bound"] > 0.02
                refused += row["policy"] == "paired_strict" and row["change"] > 0
    assert refused > 0  # paired_strict changed some decisions, within the budget, and was refused


def test_the_fixed_sequence_stops_at_the_first_law_not_certified() -> None:
    """paired_strict and paired_unanimity share a change law and are tested first; when it is
    over, the nonstrict laws after it are not tested at all."""
    table = persona_grids([(PERSONAS["left-biased"], "low")], pairs=80, k=4, seed=2)
    advice = by_policy(advise(table, max_change=0.02))
    assert advice["paired_strict"]["certificate"] == "over"
    assert advice["paired_unanimity"]["certificate"] == "over"
    assert advice["paired_nonstrict"]["certificate"] == "untested"
    assert advice["nonstrict"]["certificate"] == "untested"
    assert "not tested" in advice["nonstrict"]["note"]


def test_change_free_policies_need_no_certificate_and_full_ends_the_list() -> None:
    # K = 2: strict never stops early and the paired policies are full, so nothing that saves
    # calls is certified at a zero budget: the advice is full.
    table = persona_grids([(PERSONAS["noisy"], None)], pairs=40, k=2, seed=2)
    with pytest.raises(InputError, match="not a share"):
        advise(table, max_change=-0.01)
    with pytest.raises(InputError, match="not a confidence"):
        advise(table, max_change=0.01, level=1.0)
    rows = by_policy(advise(table, max_change=0.0))
    advised = next(r for r in rows.values() if r["rank"] == "advised")
    assert advised["policy"] == "full" and advised["certificate"] == "construction"
    assert rows["paired_strict"]["change_range"] == 0.0  # the one couple is everything
    assert len(rows) == len(POLICIES)
    # A budget as large as the range needs no test: every pair is within it by construction.
    loose = by_policy(advise(table, max_change=1.0))
    assert loose["nonstrict"]["certificate"] == "construction"
    assert loose["nonstrict"]["rank"] == "advised"


def test_advice_is_the_same_whatever_the_order_of_the_input_rows() -> None:
    table = persona_grids([(PERSONAS["strong"], "high")], pairs=120, k=4, seed=9)
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))
    assert advise(table, max_change=0.02).equals(advise(shuffled, max_change=0.02))


@pytest.mark.slow
@pytest.mark.parametrize("k", [4, 8])
def test_certified_advice_exceeds_its_budget_at_most_at_the_stated_level(k: int) -> None:
    """The coverage study (docs/design.md#certificates), small: 2,000 simulated pairs of the six
    preset configurations and their knife-edge subpopulations (paired_strict's true change
    10% over the budget), 40 resamples per (population, n, budget). The point-estimate rule
    it replaces fails the same check at small n, so the check can fail."""
    study = advice_coverage(
        population=2000, resamples=40, ns=(20, 50, 150, 600), budgets=(0.01, 0.02), k=k, knife=1.1
    )
    assert set(study["population"]) == {"preset", "knife-edge"}
    assert set(study.query("population == 'knife-edge'")["n"]) == {20, 50, 150, 600}
    certified = study[study["advisor"] == "certified"]
    assert (certified["over"] <= 0.05).all(), certified
    assert (certified["over_when_changing"] <= 0.05).all(), certified
    assert certified.query("n == 600")["changing"].gt(0).any()  # it does certify, with pairs
    point = study.query("advisor == 'point estimate' and n == 20 and population == 'preset'")
    assert (point["over"] > 0.05).any(), point
    assert (study[study["advisor"] == "oracle"]["over"] == 0).all()
