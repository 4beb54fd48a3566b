"""Leaderboards across runs: each system's score and rank in two runs (`judgeline diff`)."""

from __future__ import annotations

from typing import Any

from tasks.errors import InputError
from tasks.workdir import WorkDir

__all__ = ["system_changes"]


def _scores(work: WorkDir, run_id: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    from tasks.leaderboard import BoardOptions, run_leaderboard

    try:
        # Scores and ranks do not depend on the bootstrap: a few replicates suffice here.
        boards = run_leaderboard(work, run_id, BoardOptions(replicates=10))["boards"]
    except InputError:
        return {}
    return {
        (b["judge"], b["config"], row["system"]): {**row, "baseline": b["baseline"]}
        for b in boards
        for row in b["systems"]
    }


def system_changes(work: WorkDir, run_a: str, run_b: str) -> list[dict[str, Any]]:
    """Per (judge, config, system) ranked in both runs against the same baseline: its score
    and rank before and after (the `reference` rule); empty when either run has none."""
    before, after = _scores(work, run_a), _scores(work, run_b)
    changes = []
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        if a["baseline"] != b["baseline"]:
            continue
        changes.append(
            {
                "judge": key[0], "config": key[1], "system": key[2], "baseline": a["baseline"],
                "score_before": a["score"], "score_after": b["score"],
                "rank_before": a["rank"], "rank_after": b["rank"],
            }
        )  # fmt: skip
    return changes
