"""Leaderboards across runs: each system's score and rank in two runs (`judgeline diff`)
and in every run (the trends page)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tasks.errors import JudgelineError
from tasks.store.workdir import WorkDir

__all__ = ["system_changes", "system_trends"]


def _scores(
    work: WorkDir, run_id: str, with_length: bool = False
) -> dict[tuple[str, str, str], dict[str, Any]]:
    from tasks.leaderboard import BoardOptions, run_leaderboard

    try:
        # Scores, ranks and length-controlled rates do not depend on the bootstrap: a few
        # replicates suffice here.
        options = BoardOptions(replicates=10, length_control=with_length)
        boards = run_leaderboard(work, run_id, options)["boards"]
    except (JudgelineError, OSError, ValueError, pa.ArrowException):
        return {}  # no systems, or a damaged run (the trends and diff say so themselves)
    return {
        (b["judge"], b["config"], row["system"]): {**row, "baseline": b["baseline"]}
        for b in boards
        for row in b["systems"]
    }


def system_changes(work: WorkDir, run_a: str, run_b: str) -> list[dict[str, Any]]:
    """Per (judge, config, system) ranked in both runs against the same baseline: its score,
    rank and length-controlled win rate before and after (the `reference` rule; `bound_*`
    says when a score is a bound); empty when either run has none."""
    before, after = _scores(work, run_a, True), _scores(work, run_b, True)
    changes = []
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        if a["baseline"] != b["baseline"]:
            continue
        changes.append(
            {
                "judge": key[0], "config": key[1], "system": key[2], "baseline": a["baseline"],
                "score_before": a["score"], "score_after": b["score"],
                "bound_before": a["bound"], "bound_after": b["bound"],
                "rank_before": a["rank"], "rank_after": b["rank"],
                "lc_win_rate_before": a.get("lc_win_rate"),
                "lc_win_rate_after": b.get("lc_win_rate"),
            }
        )  # fmt: skip
    return changes


def system_trends(work: WorkDir) -> list[dict[str, Any]]:
    """Every run's leaderboard scores (`reference` rule), oldest run first: one row per
    (run, judge, config, system), for the trends page; runs without one are left out."""
    from tasks.runs.record import list_records

    rows = []
    for record in sorted(list_records(work), key=lambda r: (r.started_at, r.run_id)):
        for (judge, config, system), row in _scores(work, record.run_id).items():
            rows.append(
                {
                    "run_id": record.run_id, "judge": judge, "config": config, "system": system,
                    "baseline": row["baseline"], "score": row["score"], "rank": row["rank"],
                }
            )  # fmt: skip
    return rows
