"""Run against run: pairs and configs added and removed, paired score changes, flips."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import pytest
from support import bare_record

from schemas.run import RunRecord
from tasks.agreement.tables import COUNT_COLUMNS, alpha_change
from tasks.history.diff import diff_views, paired_interval
from tasks.history.view import RunView


def _record(run_id: str) -> RunRecord:
    return bare_record(run_id, name="nightly", started_at=dt.datetime(2026, 11, 30, tzinfo=dt.UTC))


def _view(run_id: str, pairs: dict[str, str], decisions: list[tuple[Any, ...]]) -> RunView:
    """`pairs`: pair_id -> fingerprint; `decisions`: (judge, config, pair_id, score, decision)."""
    frame = pd.DataFrame(
        [{"dataset": "d", "pair_id": p, "fingerprint": f, "key": "A"} for p, f in pairs.items()]
    )
    dec = pd.DataFrame(
        [
            {
                "judge": j,
                "config": c,
                "dataset": "d",
                "pair_id": p,
                "reference_score": s,
                "decision": d,
            }
            for j, c, p, s, d in decisions
        ]  # fmt: skip
    )
    votes = {  # calls of each value per order: a unanimous pair of its decision
        c: [(4 if d == c[-1] else 0) if c.endswith(("A", "B")) else 0 for d in dec["decision"]]
        for c in COUNT_COLUMNS
    }
    dec = dec.assign(**votes)
    configs = dec[["judge", "config"]].drop_duplicates()
    figures = configs.assign(consistency=0.5, left_share=0.75, valid_share=1.0, failed_calls=0)
    return RunView(_record(run_id), frame, dec, figures, {"sent": 4, "cached": 0})


def test_pairs_configs_scores_and_flips() -> None:
    before = _view(
        "a",
        {"p1": "x1", "p2": "x2", "p3": "x3"},
        [
            ("j", "c", "p1", 1.0, "A"),
            ("j", "c", "p2", 0.0, "B"),
            ("j", "c", "p3", 1.0, "A"),
            ("old", "c", "p1", 1.0, "A"),
        ],  # fmt: skip
    )
    # p3's answer changed (new fingerprint: removed and added), p4 is new, judge "old" gone.
    after = _view(
        "b",
        {"p1": "x1", "p2": "x2", "p3": "x3-new", "p4": "x4"},
        [
            ("j", "c", "p1", 0.0, "B"),
            ("j", "c", "p2", 0.0, "B"),
            ("j", "c", "p3", 1.0, "A"),
            ("j", "c", "p4", 1.0, "A"),
            ("new", "c", "p1", 1.0, "A"),
        ],  # fmt: skip
    )
    diff = diff_views(before, after)
    assert (diff.pairs_shared, diff.pairs_added, diff.pairs_removed) == (2, 2, 1)
    assert diff.configs_added == [("new", "c")] and diff.configs_removed == [("old", "c")]
    [change] = diff.changes
    assert (change.judge, change.config, change.shared_pairs) == ("j", "c", 2)
    assert change.score_before == pytest.approx(0.5) and change.score_after == pytest.approx(0.0)
    assert change.change_low <= change.score_change <= change.change_high
    assert [(f.pair_id, f.before, f.after) for f in diff.flips] == [("p1", "A", "B")]
    # every config of the earlier run against every config of the later run, shared pairs
    judges = {(j.before, j.after): j for j in diff.judges}
    assert set(judges) == {(x, y) for x in ("j · c", "old · c") for y in ("j · c", "new · c")}
    same = judges[("j · c", "j · c")]
    assert (same.pairs, same.raw) == (2, 0.5)  # p1 flipped A -> B, p2 stayed B
    assert same.raw_low < 0.5 < same.raw_high
    assert judges[("old · c", "new · c")].pairs == 1 and judges[("old · c", "new · c")].raw == 1


def test_paired_interval_resamples_pairs_together() -> None:
    rng = np.random.default_rng(3)
    before = rng.uniform(size=400)
    # The same shift on every pair: the paired interval is that shift exactly.
    low, high = paired_interval(before, before + 0.1, seed_parts=("j", "c"))
    assert low == pytest.approx(0.1) and high == pytest.approx(0.1)
    noisy = before + rng.normal(0.05, 0.2, size=400)
    low, high = paired_interval(before, noisy, seed_parts=("j", "c"))
    assert low < 0.05 < high and high - low < 0.1
    assert paired_interval(before, noisy, seed_parts=("j", "c")) == (low, high)


def test_alpha_change_has_a_paired_interval() -> None:
    """A judge that agrees with itself on every pair, then answers at random in a third of its
    calls: alpha falls, and the paired interval of the change excludes zero; the same run
    against itself changes by exactly zero."""
    rng = np.random.default_rng(8)
    pairs = 120
    keys = rng.integers(0, 2, size=pairs)
    steady = np.zeros((pairs, 2, 4))
    steady[np.arange(pairs), :, keys] = 4
    noisy = np.zeros((pairs, 2, 4))
    for p in range(pairs):
        for order in range(2):
            for _ in range(4):
                value = rng.integers(0, 3) if rng.uniform() < 1 / 3 else keys[p]
                noisy[p, order, value] += 1
    before, after, change = alpha_change(steady, noisy, seed_parts=("j", "c"))
    assert before == pytest.approx(1.0) and after < 0.8
    assert change.value == pytest.approx(after - before)
    assert change.low <= change.value <= change.high < 0
    same = alpha_change(noisy, noisy, seed_parts=("j", "c"))[2]
    assert same.value == same.low == same.high == 0.0
