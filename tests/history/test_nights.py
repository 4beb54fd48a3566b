"""Two nights on a growing dataset: the second pays only for new pairs, and diff and trends
say what changed."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from flows.nightly import nightly_flow
from schemas.config import DatasetSpec, RunConfig
from schemas.cost import Price
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.history.diff import diff_runs
from tasks.history.page import render_trends, write_trends
from tasks.history.trends import trend_points
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.report.filters import usd
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow


def _write_pairs(path: Path, n: int) -> None:
    rows = [
        {"id": p.pair_id, "q": p.question, "x": p.answer_a, "y": p.answer_b, "k": p.key}
        for p in demo_pairs()[:n]
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")


@pytest.fixture(scope="module")
def nights(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("nights")
    work, data = WorkDir(root / "work"), root / "pairs.jsonl"
    sent = []
    with SimJudgeServer() as server:
        judge = JudgeSpec(
            name="j", base_url=server.base_url, model="strong", simulated=True,
            price=Price(input=1.0, output=4.0, as_of=dt.date(2026, 11, 1)),
        )  # fmt: skip
        config = RunConfig(
            name="growing",
            datasets=[
                DatasetSpec(
                    kind="table",
                    path=str(data),
                    mapping="pair_id=id,question=q,answer_a=x,answer_b=y,key=k",
                    dataset="grow",
                )
            ],
            judges=[judge],
            k=2,
        )
        for night, n in (("night-1", 20), ("night-2", 30)):
            _write_pairs(data, n)
            server.clear_log()
            asyncio.run(
                nightly_flow(
                    config=config.model_dump(mode="json"), work_dir=str(work.root), run_id=night
                )
            )
            sent.append(len(server.request_log()))
    return work, sent


def test_second_night_pays_only_for_the_new_pairs(nights: Any) -> None:
    _, sent = nights
    assert sent == [20 * 2 * 2, 10 * 2 * 2]


def test_diff_names_the_new_pairs_and_keeps_shared_scores(nights: Any) -> None:
    work, _ = nights
    diff = diff_runs(work, "night-1", "night-2")
    assert (diff.pairs_shared, diff.pairs_added, diff.pairs_removed) == (20, 10, 0)
    assert diff.configs_added == [] and diff.configs_removed == []
    assert diff.calls_b["sent"] == 40 and diff.calls_b["cached"] == 80
    [change] = diff.changes
    # Shared pairs reuse every cached call: nothing about them can change.
    assert change.shared_pairs == 20 and change.score_change == 0 and diff.flips == []


def test_trends_page_holds_both_nights(nights: Any) -> None:
    work, _ = nights
    points = trend_points(work)
    assert [p.run_id for p in points] == ["night-1", "night-2"]
    assert [p.pairs for p in points] == [20, 30]
    assert all(p.score_low <= p.score <= p.score_high for p in points)
    assert all(p.alpha_low <= p.alpha <= p.alpha_high for p in points)
    # Night 2 sent only its 10 new pairs' calls, and paid for them alone.
    assert [p.sent_calls for p in points] == [80, 40]
    assert 0 < points[1].usd < points[0].usd
    page = write_trends(work, points).read_text("utf-8")
    assert page.count("<svg") == 6 and "night-2" in page
    assert f"<td>{usd(points[0].usd)}</td>" in page  # the table's USD cell
    assert f"<td>{points[0].alpha:.3f} ({points[0].alpha_low:.3f}-" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")


def test_trends_page_escapes_names() -> None:
    from tasks.history.trends import TrendPoint

    point = TrendPoint(
        run_id="r1", name="<b>n</b>", started_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        status="completed", judge="<script>x</script>", config="c", pairs=3, score=0.5,
        score_low=0.4, score_high=0.6, consistency=float("nan"), left_share=0.5,
        valid_share=1.0, failed_calls=0, pu_savings=0.2,
    )  # fmt: skip
    page = render_trends([point])
    assert "<script>x" not in page and "&lt;script&gt;x" in page
    assert "not priced" in page  # no USD: the judge has no price
    assert "<b>n</b>" not in page
