"""The advisor (docs/design.md#advice): budget, runner-up, no-policy case, held-out coverage."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tasks.errors import InputError
from tasks.replay.advisor import advise
from tasks.simjudge.persona import PRESETS, Persona

PERSONAS = {p.name: p for p in PRESETS}


def simulated_outcomes(persona: Persona, pairs: int, k: int, seed: int) -> pa.Table:
    """The full grid of a simulated judge with a known persona (its documented draw order):
    invalid, abstention, tie, else the left slot with `left_bias`, else the key with `skill`."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(pairs):
        key = "A" if rng.random() < 0.5 else "B"
        other = "B" if key == "A" else "A"
        for s in range(k):
            for order in ("AB", "BA"):
                left = "A" if order == "AB" else "B"
                draw = rng.random()
                if draw < persona.invalid_rate:
                    outcome = "I"
                elif draw < persona.invalid_rate + persona.abstain_rate:
                    outcome = "X"
                elif draw < persona.invalid_rate + persona.abstain_rate + persona.tie_rate:
                    outcome = "T"
                elif rng.random() < persona.left_bias:
                    outcome = left
                else:
                    outcome = key if rng.random() < persona.skill else other
                rows.append(
                    {
                        "judge": persona.name,
                        "config": "default",
                        "dataset": "sim",
                        "pair_id": f"p{p}",
                        "seed": s,
                        "order": order,
                        "outcome": outcome,
                        "key": key,
                    }
                )
    return pa.Table.from_pylist(rows)


def test_advised_policy_is_the_cheapest_within_budget_on_the_selection_half() -> None:
    table = simulated_outcomes(PERSONAS["noisy"], 120, 4, seed=1)
    advice = advise(table, max_change=0.05, rng_seed=3, resamples=400).to_pylist()
    advised, runner_up = advice
    assert (advised["rank"], runner_up["rank"]) == ("advised", "runner_up")
    assert advised["selection_change"] <= 0.05 and runner_up["selection_change"] <= 0.05
    assert advised["selection_savings"] >= runner_up["selection_savings"]
    assert advised["selection_pairs"] == advised["holdout_pairs"] == 60
    for row in advice:
        for part in ("selection_savings", "selection_change", "holdout_change"):
            assert row[f"{part}_low"] <= row[part] <= row[f"{part}_high"]
    # A zero budget leaves only policies that never change a decision.
    strict = advise(table, max_change=0.0, rng_seed=3, resamples=200).to_pylist()
    assert strict[0]["policy"] in ("strict", "paired_unanimity_2")
    assert strict[0]["holdout_change"] == 0.0


def test_no_qualifying_policy_is_said() -> None:
    # K = 2: strict never stops early and every other candidate changes decisions, so with
    # no budget nothing both saves calls and stays within it.
    table = simulated_outcomes(PERSONAS["noisy"], 40, 2, seed=2)
    with pytest.raises(InputError, match="not a share"):
        advise(table, max_change=-0.01)
    rows = advise(table, max_change=0.0, rng_seed=1, resamples=100).to_pylist()
    assert len(rows) == 1 and rows[0]["policy"] is None
    assert "keep full" in rows[0]["note"]
    loose = advise(table, max_change=1.0, rng_seed=1, resamples=100).to_pylist()
    assert loose[0]["policy"] is not None and loose[0]["selection_savings"] > 0


@pytest.mark.slow
def test_held_out_change_stays_within_the_predicted_interval() -> None:
    """Stated share: the held-out change lies in the 95% prediction interval for at least
    90% of seeds (selection on the same half biases it a little)."""
    inside = []
    for seed in range(40):
        table = simulated_outcomes(PERSONAS["left-biased"], 160, 4, seed=100 + seed)
        row = advise(table, max_change=0.03, rng_seed=seed, resamples=500).to_pylist()[0]
        assert row["policy"] is not None
        inside.append(
            row["predicted_change_low"] <= row["holdout_change"] <= row["predicted_change_high"]
        )
    assert np.mean(inside) >= 0.9, np.mean(inside)
