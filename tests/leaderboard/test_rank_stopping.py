"""What stopping policies do to a leaderboard: exact swap probabilities from the replay."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from tasks.leaderboard.battles import Battles
from tasks.leaderboard.stopping import stopping_effects

# Pairs p0-p2: s1 (A) vs base (B); p3-p5: base (A) vs s2 (B), as round-robin orders them.
SYSTEMS = ["base", "s1", "s2"]
PAIR_A = np.array([1, 1, 1, 0, 0, 0])
PAIR_B = np.array([0, 0, 0, 2, 2, 2])


def _battles() -> Battles:
    empty = np.array([], dtype=str)
    return Battles(
        judge="j", config="c", systems=SYSTEMS, baseline="base", questions=["q"] * 3,
        pair_ids=[f"p{i}" for i in range(6)], pair_a=PAIR_A, pair_b=PAIR_B,
        pair_question=np.array([0, 1, 2, 0, 1, 2]), pair=np.array([], dtype=np.int64),
        ab=empty, ba=empty, ab_strong=np.array([], bool), ba_strong=np.array([], bool),
    )  # fmt: skip


def _tables(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """Replay and design rows for policies `full` and `nonstrict`, and the stopped decision
    distribution (P(A), P(neutral), P(B)) of each pair under `nonstrict`."""
    replay, design, truth = [], [], []
    for i in range(6):
        p_ref_n = rng.uniform(0, 0.4)
        n2d, d2n = rng.uniform(0, p_ref_n), rng.uniform(0, 0.2)
        p_n = p_ref_n - n2d + d2n
        p_a = rng.uniform(0, 1 - p_n)
        truth.append((p_a, p_n, 1 - p_a - p_n))
        design.append({"judge": "j", "config": "c", "pair_id": f"p{i}", "design": "balanced",
                       "p_neutral": p_ref_n})  # fmt: skip
        for policy, score, moves, calls in (
            ("full", rng.uniform(0.2, 0.8), (0.0, 0.0), 4.0),
            ("nonstrict", p_a + p_n / 2, (n2d, d2n), 2.5),
        ):
            replay.append({"judge": "j", "config": "c", "pair_id": f"p{i}", "design": "balanced",
                           "policy": policy, "expected_calls": calls, "expected_score": score,
                           "p_neutral_to_decisive": moves[0],
                           "p_decisive_to_neutral": moves[1]})  # fmt: skip
    return pd.DataFrame(replay), pd.DataFrame(design), np.array(truth)


def test_swap_probabilities_equal_an_enumeration_of_every_outcome() -> None:
    replay, design, truth = _tables(np.random.default_rng(4))
    effects = {e["policy"]: e for e in stopping_effects(_battles(), "base", replay, design, 4)}
    nonstrict = effects["nonstrict"]
    assert nonstrict["pairs"] == 6 and nonstrict["calls_saved"] == pytest.approx(6 * 1.5)
    assert nonstrict["savings"] == pytest.approx(1.5 / 4) and effects["full"]["savings"] == 0
    # every combination of the six pairs' stopped decisions (A, neutral, B)
    share = {"s1": 0.0, "s2": 0.0}
    below: dict[tuple[str, str], float] = {}
    order = [a["higher"] for a in nonstrict["adjacent"]] + [nonstrict["adjacent"][-1]["lower"]]
    assert sorted(order) == SYSTEMS
    for combo in itertools.product(range(3), repeat=6):
        p = float(np.prod([truth[i, c] for i, c in enumerate(combo)]))
        score = {"base": 0.5, "s1": 0.0, "s2": 0.0}
        for i, c in enumerate(combo):
            a_score = (1.0, 0.5, 0.0)[c]
            if PAIR_A[i] == 1:
                score["s1"] += a_score / 3
            else:
                score["s2"] += (1 - a_score) / 3
        for higher, lower in itertools.pairwise(order):
            swap = 1.0 if score[lower] > score[higher] + 1e-12 else 0.0
            swap += 0.5 if abs(score[lower] - score[higher]) <= 1e-12 else 0.0
            below[(higher, lower)] = below.get((higher, lower), 0.0) + p * swap
        share["s1"] += p * score["s1"]
    for adjacent in nonstrict["adjacent"]:
        assert adjacent["p_swap"] == pytest.approx(below[(adjacent["higher"], adjacent["lower"])])
    assert nonstrict["expected_swaps"] == pytest.approx(sum(below.values()))
    assert share["s1"] == pytest.approx((truth[:3, 0] + truth[:3, 1] / 2).mean())


def test_calls_count_every_pair_and_swaps_only_the_pairs_with_the_baseline() -> None:
    """Round-robin: a pair of s1 against s2 adds its calls, not its decision, to the figures."""
    replay, design, _ = _tables(np.random.default_rng(6))
    extra = replay[replay["pair_id"] == "p0"].assign(pair_id="p6")
    replay = pd.concat([replay, extra], ignore_index=True)
    design = pd.concat([design, design[design["pair_id"] == "p0"].assign(pair_id="p6")])
    battles = _battles()
    battles = Battles(**{**battles.__dict__, "pair_ids": [*battles.pair_ids, "p6"],
                         "pair_a": np.r_[PAIR_A, 1], "pair_b": np.r_[PAIR_B, 2],
                         "pair_question": np.r_[battles.pair_question, 0]})  # fmt: skip
    with_extra = {e["policy"]: e for e in stopping_effects(battles, "base", replay, design, 4)}
    without = {e["policy"]: e for e in stopping_effects(_battles(), "base", *_tables(
        np.random.default_rng(6))[:2], 4)}  # fmt: skip
    assert (
        with_extra["nonstrict"]["pairs"] == 7
        and with_extra["nonstrict"]["pairs_with_baseline"] == 6
    )
    assert with_extra["nonstrict"]["calls_saved"] == pytest.approx(7 * 1.5)
    for a, b in zip(
        with_extra["nonstrict"]["adjacent"], without["nonstrict"]["adjacent"], strict=True
    ):
        assert a["p_swap"] == pytest.approx(b["p_swap"], abs=1e-12)
