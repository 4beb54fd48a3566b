"""The run's Prefect artifacts: names from configuration and data files are text in the
markdown summary, whatever they hold."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

from tasks.report import artifacts
from tasks.store.workdir import WorkDir

NAMES = {"judge": "a|b", "config": "low\nhigh", "dataset": "<img src=x onerror=alert(1)>*x*"}


def _disclosure() -> pd.DataFrame:
    counts = {"planned": 8, "valid": 7, "missing": 1, "invalid": 0, "conflicting": 2}
    return pd.DataFrame([{**NAMES, **counts, "consistency": 0.75, "accuracy_of_stable": None}])


def _scores() -> pd.DataFrame:
    columns = ["judge", "config", "dataset", "policy", "score", "ci_low", "ci_high", "savings",
               "p_change", "match_extra", "design"]  # fmt: skip
    return pd.DataFrame(columns=columns)


@pytest.fixture
def summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> str:
    tables = {"report_disclosure": _disclosure(), "report_scores": _scores()}
    monkeypatch.setattr(artifacts, "query", lambda work, name, **_: tables[name])
    monkeypatch.setattr(artifacts, "_leaderboard_rows", lambda work, run_id: None)
    content = artifacts.run_artifacts(WorkDir(tmp_path), "r1", "/work/runs/r1/a`b|report.html")
    return str(content["markdown"])


def test_names_cannot_break_or_format_the_summary_table(summary: str) -> None:
    rows = [line for line in summary.splitlines() if line.startswith("|")]
    header, _, row = rows
    cells = re.split(r"(?<!\\)\|", row)[1:-1]  # unescaped pipes only
    assert len(cells) == len(re.split(r"(?<!\\)\|", header)[1:-1]) == 10
    escaped = r"\<img src\=x onerror\=alert\(1\)\>\*x\*"
    assert [c.strip() for c in cells[:3]] == [r"a\|b", "low high", escaped]
    assert re.search(r"(?<!\\)[<>*\n]", row) is None  # no tag, emphasis or line break


def test_the_report_path_is_one_code_span(summary: str) -> None:
    line = next(line for line in summary.splitlines() if line.startswith("Report: "))
    assert line == "Report: ``/work/runs/r1/a`b|report.html``"
