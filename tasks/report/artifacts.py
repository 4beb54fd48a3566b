"""Prefect artifacts of a run: a markdown summary and tables, visible in the Prefect UI."""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

import pandas as pd

from tasks.store.workdir import WorkDir
from tasks.warehouse import query

SUMMARY_POLICIES = ("full", "nonstrict", "strict", "paired_unanimity")


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-safe rows: NaN becomes None, floats are rounded for reading."""
    rows = []
    for row in frame.to_dict(orient="records"):
        clean: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, float):
                clean[str(key)] = None if math.isnan(value) else round(value, 4)
            else:
                clean[str(key)] = value
        rows.append(clean)
    return rows


def artifact_key(run_id: str, what: str) -> str:
    """Artifact keys allow lowercase letters, digits and dashes only."""
    safe = "".join(c if c.isalnum() else "-" for c in run_id.lower())
    return f"judgeline-{safe}-{what}"


_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
"""ASCII punctuation: CommonMark lets a backslash make each of them literal text."""


def markdown_text(value: Any) -> str:
    """`value` as literal text in a markdown table cell: every ASCII punctuation mark
    backslash-escaped (a `|` would end the cell, a `<b>` or `*` would format), line breaks
    and other control characters as spaces (a newline would end the row)."""
    text = "".join(" " if unicodedata.category(c) == "Cc" else c for c in str(value))
    return _PUNCTUATION.sub(r"\\\1", text)


def markdown_code(value: str) -> str:
    """`value` as a code span: fenced by more backticks than any run of them inside, on one
    line."""
    text = " ".join(value.splitlines())
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def summary_markdown(run_id: str, report_path: str | None, disclosure: list[dict[str, Any]]) -> str:
    """The summary artifact: the report's place and the disclosure counts per judge config.
    Names come from configuration and data files, so every cell is escaped."""
    lines = [f"# judgeline run {markdown_code(run_id)}", ""]
    if report_path:
        lines += [f"Report: {markdown_code(report_path)}", ""]
    lines += [
        "| judge | config | dataset | planned | valid | missing | invalid | conflicting "
        "| consistency | accuracy of stable |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in disclosure:
        shares = [
            "-" if d[c] is None else f"{d[c]:.1%}" for c in ("consistency", "accuracy_of_stable")
        ]
        counts = [d[c] for c in ("planned", "valid", "missing", "invalid", "conflicting")]
        names = [markdown_text(d[c]) for c in ("judge", "config", "dataset")]
        lines.append("| " + " | ".join(str(c) for c in [*names, *counts, *shares]) + " |")
    lines += ["", "Consistency and agreement with the key are reported separately."]
    return "\n".join(lines)


def run_artifacts(work: WorkDir, run_id: str, report_path: str | None) -> dict[str, Any]:
    """What the run's artifacts hold: markdown text and table rows (pure, testable)."""
    disclosure = query(work, "report_disclosure", run_id=run_id)
    scores = query(work, "report_scores", run_id=run_id)
    balanced = scores[(scores.design == "balanced") & scores.policy.isin(SUMMARY_POLICIES)]
    policy_rows = balanced[
        ["judge", "config", "dataset", "policy", "score", "ci_low", "ci_high", "savings"]
        + ["p_change", "match_extra"]
    ]
    return {
        "markdown": summary_markdown(run_id, report_path, _records(disclosure)),
        "disclosure": _records(disclosure),
        "policies": _records(policy_rows),
        "leaderboard": _leaderboard_rows(work, run_id),
    }


def _leaderboard_rows(work: WorkDir, run_id: str) -> list[dict[str, Any]] | None:
    """One row per (judge config, rule, system) of the run's leaderboards; None without."""
    from tasks.report.leaderboard import run_boards

    boards = run_boards(work, run_id)
    if boards is None:
        return None
    shown = ("system", "rank", "score", "lower", "upper", "bound", "win_rate", "lc_win_rate",
             "wins", "ties", "losses", "conflicts")  # fmt: skip
    rows = [
        {"judge": b["judge"], "config": b["config"], "rule": rule, **{k: r.get(k) for k in shown}}
        for b in boards
        for rule, table in b["rules"].items()
        for r in table["systems"]
    ]
    return _records(pd.DataFrame(rows))


def publish_artifacts(work: WorkDir, run_id: str, report_path: str | None) -> list[str]:
    """Create the run's markdown and table artifacts in the current flow run; returns keys."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    content = run_artifacts(work, run_id, report_path)
    keys = [artifact_key(run_id, w) for w in ("summary", "disclosure", "policies")]
    create_markdown_artifact(
        content["markdown"], key=keys[0], description=f"judgeline run {run_id}"
    )
    create_table_artifact(
        content["disclosure"], key=keys[1], description="Disclosure counts per judge config"
    )
    create_table_artifact(
        content["policies"],
        key=keys[2],
        description="Scores, savings and decision changes per policy (balanced design)",
    )
    if content["leaderboard"] is not None:
        keys.append(artifact_key(run_id, "leaderboard"))
        create_table_artifact(
            content["leaderboard"],
            key=keys[-1],
            description="Systems ranked against the baseline per judge config and counting rule",
        )
    return keys
