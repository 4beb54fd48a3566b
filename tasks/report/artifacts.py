"""Prefect artifacts of a run: a markdown summary and tables, visible in the Prefect UI."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from typing import Any

import pandas as pd

from tasks.warehouse import query
from tasks.workdir import WorkDir

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


def run_artifacts(work: WorkDir, run_id: str, report_path: str | None) -> dict[str, Any]:
    """What the run's artifacts hold: markdown text and table rows (pure, testable)."""
    disclosure = query(work, "report_disclosure", run_id=run_id)
    scores = query(work, "report_scores", run_id=run_id)
    balanced = scores[(scores.design == "balanced") & scores.policy.isin(SUMMARY_POLICIES)]
    policy_rows = balanced[
        ["judge", "config", "dataset", "policy", "score", "ci_low", "ci_high", "savings"]
        + ["p_change", "match_extra"]
    ]
    lines = [f"# judgeline run `{run_id}`", ""]
    if report_path:
        lines += [f"Report: `{report_path}`", ""]
    lines += [
        "| judge | config | dataset | planned | valid | missing | invalid | conflicting "
        "| consistency | accuracy of stable |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in _records(disclosure):
        shares = [
            "-" if d[c] is None else f"{d[c]:.1%}" for c in ("consistency", "accuracy_of_stable")
        ]
        counts = [d[c] for c in ("planned", "valid", "missing", "invalid", "conflicting")]
        cells = [d["judge"], d["config"], d["dataset"], *counts, *shares]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "Consistency and agreement with the key are reported separately."]
    return {
        "markdown": "\n".join(lines),
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
    shown = ("system", "rank", "score", "lower", "upper", "win_rate", "wins", "ties", "losses",
             "conflicts")  # fmt: skip
    rows = [
        {"judge": b["judge"], "config": b["config"], "rule": rule, **{k: r[k] for k in shown}}
        for b in boards
        for rule, table in b["rules"].items()
        for r in table["systems"]
    ]
    return _records(pd.DataFrame(rows))


def publish_artifacts(work: WorkDir, run_id: str, report_path: str | None) -> list[str]:
    """Create the run's markdown and table artifacts in the current flow run; returns keys.

    Each artifact is one request to the Prefect server, which answers them side by side:
    they are sent at once (one after another, the three of a small run took ~0.2 s of its
    report stage). Each thread runs in a copy of this context, so every artifact belongs to
    the current task run; a failed request raises once all have been answered."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    content = run_artifacts(work, run_id, report_path)
    made: list[tuple[str, Callable[..., Any], Any, str]] = [
        ("summary", create_markdown_artifact, content["markdown"], f"judgeline run {run_id}"),
        ("disclosure", create_table_artifact, content["disclosure"],
         "Disclosure counts per judge config"),
        ("policies", create_table_artifact, content["policies"],
         "Scores, savings and decision changes per policy (balanced design)"),
    ]  # fmt: skip
    if content["leaderboard"] is not None:
        made.append(
            ("leaderboard", create_table_artifact, content["leaderboard"],
             "Systems ranked against the baseline per judge config and counting rule")
        )  # fmt: skip
    keys = [artifact_key(run_id, what) for what, *_ in made]
    with ThreadPoolExecutor(len(made)) as pool:
        sent = [
            pool.submit(copy_context().run, create, data, key=key, description=description)
            for key, (_, create, data, description) in zip(keys, made, strict=True)
        ]
    for future in sent:
        future.result()
    return keys
