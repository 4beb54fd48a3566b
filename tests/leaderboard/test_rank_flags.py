"""Ranks that depend on how order conflicts are counted are flagged."""

from __future__ import annotations

import numpy as np

from tasks.leaderboard import BoardOptions, rank_flags
from tasks.leaderboard.battles import RULES, Battles
from tasks.leaderboard.board import score_rule


def _battles() -> Battles:
    """s1: 10 stable wins and 30 order conflicts against the baseline; s2: 30 stable wins
    and 10 stable losses. Counting a conflict as a tie ranks s2 first; dropping conflicts
    ranks s1 first."""
    outcomes = {
        "s1": [("A", "A")] * 10 + [("A", "B")] * 30,
        "s2": [("A", "A")] * 30 + [("B", "B")] * 10,
    }
    pair_a, pair, ab, ba = [], [], [], []
    for system, games in outcomes.items():
        for ab_outcome, ba_outcome in games:
            pair.append(len(pair_a))
            pair_a.append(int(system[1]))
            ab.append(ab_outcome)
            ba.append(ba_outcome)
    size = len(pair_a)
    return Battles(
        judge="j", config="c", systems=["base", "s1", "s2"], baseline="base",
        questions=[f"q{i}" for i in range(40)], pair_ids=[f"p{i}" for i in range(size)],
        pair_a=np.array(pair_a), pair_b=np.zeros(size, dtype=np.int64),
        pair_question=np.array(pair) % 40, pair=np.array(pair), ab=np.array(ab), ba=np.array(ba),
        ab_strong=np.zeros(size, bool), ba_strong=np.zeros(size, bool),
    )  # fmt: skip


def test_systems_whose_rank_depends_on_the_rule_are_flagged_with_their_swaps() -> None:
    battles = _battles()
    tables = {rule: score_rule(battles, rule, BoardOptions(replicates=200), None) for rule in RULES}
    ranks = {rule: {r["system"]: r["rank"] for r in t.rows} for rule, t in tables.items()}
    assert ranks["reference"] == {"s2": 1, "s1": 2, "base": 3}
    assert ranks["drop-conflicts"] == {"s1": 1, "s2": 2, "base": 3}
    assert ranks["per-order"] == ranks["reference"]
    flags = {f["system"]: f for f in rank_flags(dict(tables), "reference")}
    assert set(flags) == {"s1", "s2"}
    assert flags["s1"]["ranks"] == {"reference": 2, "drop-conflicts": 1, "per-order": 2}
    (swap,) = flags["s1"]["swapped_with"]
    assert swap["system"] == "s2"
    rows = {r["system"]: r for r in tables["reference"].rows}
    overlap = (
        rows["s1"]["lower"] <= rows["s2"]["upper"] and rows["s2"]["lower"] <= rows["s1"]["upper"]
    )
    assert swap["intervals_overlap"] == overlap
    assert rows["s1"]["conflicts"] == 30 and rows["s2"]["conflicts"] == 0
    assert (rows["s1"]["wins"], rows["s1"]["ties"], rows["s1"]["losses"]) == (10, 30, 0)
