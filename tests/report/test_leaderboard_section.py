"""The report's leaderboard section: the length-controlled win rate, a bound marked as one,
and the board's notes."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
from test_report import synthetic_report_data

from tasks.leaderboard import BoardOptions, leaderboard_of
from tasks.report.render import render_report


def _outcomes_and_manifest() -> tuple[pd.DataFrame, pa.Table]:
    """Three systems against the baseline on 30 questions; `s-none` loses every game."""
    rng = np.random.default_rng(5)
    pairs, rows = [], []
    for q in range(30):
        for system, p in (("s-good", 0.7), ("s-fair", 0.45), ("s-none", 0.0)):
            pair_id = f"q{q}:{system}:base"
            meta = {"model_a": system, "model_b": "base", "role_a": "system",
                    "role_b": "baseline", "question_id": f"q{q}"}  # fmt: skip
            answer = "a " * int(rng.integers(5, 60))
            pairs.append({"pair_id": pair_id, "dataset": "d", "question": f"Q{q}?",
                          "metadata": json.dumps(meta), "answer_a": answer,
                          "answer_b": "b " * 30})  # fmt: skip
            for seed in range(2):
                for order in ("AB", "BA"):
                    outcome = "A" if rng.random() < p else "B"
                    rows.append({"judge": "j", "config": "c", "pair_id": pair_id,
                                 "seed": seed, "order": order, "outcome": outcome,
                                 "strength": "weak"})  # fmt: skip
    return pd.DataFrame(rows), pa.Table.from_pylist(pairs)


def test_the_section_shows_lc_win_rates_and_marks_a_bound() -> None:
    outcomes, manifest = _outcomes_and_manifest()
    boards = leaderboard_of(outcomes, manifest, BoardOptions(length_control=True, replicates=200))
    (board,) = boards
    none = next(r for r in board["systems"] if r["system"] == "s-none")
    assert none["bound"] == "upper" and none["lower"] is None and none["score"] < 1000
    assert none["win_rate_bound"] == "upper" and 0 < none["win_rate"] < 15
    html = render_report(replace(synthetic_report_data(), leaderboard=boards))
    section = html.split('id="leaderboard"', 1)[1].split("</section>", 1)[0]
    assert "LC win % (95%)" in section
    row = re.search(r'<tr data-system="s-none">(.*?)</tr>', section, re.S)
    assert row and "≤ " in row.group(1) and "below " in row.group(1)
    assert "bound, not estimate: s-none" in section
