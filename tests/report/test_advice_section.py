"""The report's advice section and the warehouse's advice view (tasks/report/advice.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.replay.advisor import advise
from tasks.report.render import render_report
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir
from tasks.warehouse import build_warehouse, query
from tests.report.test_report import synthetic_report_data


def advice_table() -> pa.Table:
    """Advice for one judge whose slots agree on most pairs (some policy qualifies)."""
    rng = random.Random(5)
    rows = []
    for p in range(60):
        winner = rng.choice("AB")
        for seed in range(4):
            for order in ("AB", "BA"):
                outcome = winner if rng.random() < 0.9 else rng.choice("ABT")
                rows.append(
                    {"judge": "j", "config": "c", "dataset": "d", "pair_id": f"p{p}",
                     "seed": seed, "order": order, "outcome": outcome, "key": winner}
                )  # fmt: skip
    return advise(pa.Table.from_pylist(rows), max_change=0.2)


def section(html: str) -> str:
    start = html.index('<section id="advice">')
    return html[start : html.index("</section>", start)]


def test_advice_section_shows_the_advised_policy_its_bound_and_certificate() -> None:
    advice = advice_table()
    rows = advice.to_pylist()
    advised = next(r for r in rows if r["rank"] == "advised")
    assert advised["certificate"] in ("certified", "construction")
    data = synthetic_report_data()
    assert 'id="advice"' not in render_report(data)
    data.advice = advice.to_pandas()
    shown = section(render_report(data))
    assert advised["policy"] in shown and advised["certificate"] in shown
    assert advised["note"].split(":")[0] in shown
    assert f"{100 * advised['change_bound']:.2f}%" in shown
    assert "Certificates hold at 95% family-wise" in shown
    for row in rows:  # only the advised, runner-up and candidate rows are shown
        if row["rank"] == "other":
            assert f">{row['note']}<" not in shown


def test_the_warehouse_serves_a_runs_advice(tmp_path: Path) -> None:
    work = WorkDir.at(tmp_path / "work")
    build_warehouse(work)
    assert query(work, "report_advice", run_id="r1").empty
    advice = advice_table()
    folder = RunFolder(work, "r1").create()
    pq.write_table(advice, folder.path / "advice.parquet")
    frame = query(work, "report_advice", run_id="r1")
    assert sorted(frame["policy"].tolist()) == sorted(advice["policy"].to_pylist())
    assert (frame["rank"] == "advised").sum() == 1
    assert set(frame.columns) >= {"change_bound", "certificate", "pairs_needed"}
    assert query(work, "report_advice", run_id="other").empty
