"""A leaderboard's warnings, one line each, for the CLI and the report."""

from __future__ import annotations

from typing import Any

__all__ = ["board_notes"]


def board_notes(board: dict[str, Any]) -> list[str]:
    """The board's warnings, one line each: bounds standing in for scores, replicates
    without a finite estimate, style or length terms the systems explain."""
    out = []
    bounded = [r["system"] for r in board["systems"] if r["bound"] or r["win_rate_bound"]]
    if bounded:
        out.append(
            f"bound, not estimate: {', '.join(bounded)} won (or lost) no game against the "
            f"systems it met; <= / >= is a one-sided {(1 + board['confidence']) / 2:.1%} "
            "bound from its questions with the baseline"
        )
    open_ended = [f"{r['system']} ({r['unbounded_replicates']})" for r in board["systems"]
                  if r["unbounded_replicates"] and not r["bound"]]  # fmt: skip
    if open_ended:
        out.append(
            f"replicates without a finite score (of {board['replicates']}): "
            f"{', '.join(open_ended)}; an interval end they reach is open"
        )
    check = board.get("style_check")
    if check and not check["identified"]:
        shares = ", ".join(
            f"{n} (R2 {check['r2'][n]['systems']:.2f} from the systems, "
            f"{check['r2'][n]['systems_and_others']:.2f} with the other covariates)"
            for n in check["confounded"]
        )
        out.append(
            f"style control not identified: {shares} cannot be told apart from the systems "
            "or each other; controlled ranks not identified (n.i.)"
        )
    length = board.get("length")
    if length and not length["identified"]:
        out.append(
            f"length control not identified: the systems explain {length['r2_systems']:.0%} "
            "of the fitted length term; the LC win rates rest on the model's form"
        )
    return out
