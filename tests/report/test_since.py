"""The report's section "since the previous run of this configuration": the diff, the money,
the flipped pairs readable in place, the probe's comparison and the alarms."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from flows.nightly import nightly_flow
from schemas.config import AlarmSpec, DatasetSpec, ProbeSpec, RunConfig
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.history.diff import diff_runs
from tasks.history.probe import PROBE_DATE_ENV
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.report.since import since_section
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow


def _write_pairs(path: Path, n: int) -> None:
    rows = [
        {"id": p.pair_id, "q": p.question, "x": p.answer_a, "y": p.answer_b, "k": p.key}
        for p in demo_pairs()[:n]
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")


def test_second_night_report_says_what_changed(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, data = WorkDir(tmp_path / "work"), tmp_path / "pairs.jsonl"
    # Night 2 adds pairs and judges at another temperature (the same configuration: name, K,
    # template and judge config names), with a judge that turned left-biased: its new calls
    # flip some shared pairs' decisions.
    nights = [("n1", 40, 0.0, 0.0, "2026-11-29"), ("n2", 50, 0.5, 0.9, "2026-11-30")]
    for run_id, n, temperature, left_bias, day in nights:
        _write_pairs(data, n)
        monkeypatch.setenv(PROBE_DATE_ENV, day)
        persona = Persona(name="judge", skill=0.9, left_bias=left_bias, tie_rate=0.03)
        with SimJudgeServer([persona]) as server:
            judge = JudgeSpec(
                name="j", base_url=server.base_url, model="judge", simulated=True,
                temperature=temperature,
                price={"input": 1.0, "output": 2.0, "as_of": "2026-01-01", "source": "test"},
            )  # fmt: skip
            config = RunConfig(
                name="since",
                datasets=[DatasetSpec(kind="table", path=str(data), dataset="grow",
                                      mapping="pair_id=id,question=q,answer_a=x,answer_b=y,key=k")],
                judges=[judge],
                k=2,
                probe=ProbeSpec(pairs=10, rng_seed=1),
                alarms=AlarmSpec(),
            )  # fmt: skip
            asyncio.run(
                nightly_flow(config=config.model_dump(mode="json"), work_dir=str(work.root),
                             run_id=run_id)
            )  # fmt: skip
    first = since_section(work, "n1")
    assert first.previous is None and first.rows == [] and first.alarms == []
    section = since_section(work, "n2")
    diff = diff_runs(work, "n1", "n2")
    assert section.previous == "n1" and diff.flips
    assert section.lines[0] == "pairs: 40 shared, 10 added, 0 removed"
    [row] = section.rows
    assert row["config"] == "j · default" and row["flips"] == str(len(diff.flips))
    money = {m["run"]: m for m in section.money}
    # Night 2 sends only the new pairs' calls, and the probe's fresh ones; both are priced.
    assert (
        money["this run"]["sent"] == str(diff.calls_b["sent"])
        and money["this run"]["usd"] != "not priced"
    )
    assert money["drift probe"]["sent"] == str(10 * 2 * 2)
    assert any("agreement" in line for line in section.probe)
    assert any(a.startswith("probe_agreement") for a in section.alarms)
    flip = section.flips[0]
    assert flip.views and {c.order for c in flip.views[0].calls} == {"AB", "BA"}
    html = (work.runs / "n2" / "report.html").read_text("utf-8")
    assert 'id="since"' in html and f'id="{flip.anchor}"' in html
    assert flip.views[0].question.splitlines()[0][:30] in html.replace("&#39;", "'")
    assert "Alarms (" in html and "Drift probe" in html
    assert "No earlier completed run" in (work.runs / "n1" / "report.html").read_text("utf-8")
