"""The nightly flow end to end over loopback: record, identical reruns, report and artifacts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flows.nightly import nightly_flow
from schemas.config import DatasetSpec, RunConfig
from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.report.artifacts import artifact_key
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow
TABLES = ("outcomes", "dispositions", "disclosure", "replay", "summary", "design", "components")


def _config(base_url: str) -> RunConfig:
    judge = JudgeSpec(
        name="strong",
        base_url=base_url,
        simulated=True,
        model="strong",
        configs=[ReasoningConfig(name="high", extra={"reasoning_effort": "high"})],
        max_concurrency=16,
    )
    return RunConfig(name="nightly-test", datasets=[DatasetSpec(kind="demo")], judges=[judge], k=2)


def _run(config: RunConfig, work: WorkDir, run_id: str) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(
        nightly_flow(config=config.model_dump(mode="json"), work_dir=str(work.root), run_id=run_id)
    )
    return result


@pytest.fixture(scope="module")
def two_nights(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[WorkDir, list[dict[str, Any]], list[int]]:
    """The same configuration run twice on one work dir; requests counted per night."""
    work = WorkDir(tmp_path_factory.mktemp("nightly") / "work")
    with SimJudgeServer() as server:
        config = _config(server.base_url)
        records, requests = [], []
        for night in ("night-1", "night-2"):
            server.clear_log()
            records.append(_run(config, work, night))
            requests.append(len(server.request_log()))
    return work, records, requests


def test_first_night_records_everything(two_nights: Any) -> None:
    work, (first, _), (sent, _) = two_nights
    assert first["status"] == "completed"
    assert sent == first["calls"]["sent"] > 0
    planned = first["calls"]["planned"]
    assert planned == 150 * 2 * 2  # demo pairs x K seeds x 2 orders, one judge config
    assert sum(first["outcomes"].values()) == planned
    assert set(first["outcomes"]) == {"A", "B", "T", "X", "I", "M"}
    assert len(first["config_hash"]) == 64 and first["manifest_hash"] and first["plan_id"]
    code = first["code"]
    assert code["commit"] is None or len(code["commit"]) == 40
    assert {"prefect", "duckdb", "pyarrow"} <= set(code["packages"])
    assert first["started_at"] <= first["ended_at"]
    stored = json.loads((work.run_dir("night-1") / "record.json").read_text("utf-8"))
    assert stored["status"] == "completed" and stored["outcomes"] == first["outcomes"]
    assert Path(first["report"]).is_file()


def test_second_night_reuses_every_call_and_reproduces_the_tables(two_nights: Any) -> None:
    work, (first, second), (_, resent) = two_nights
    assert resent == 0
    assert second["calls"]["sent"] == 0
    assert second["manifest_hash"] == first["manifest_hash"]
    assert second["plan_id"] == first["plan_id"]
    assert second["config_hash"] == first["config_hash"]
    for name in TABLES:
        a = pq.read_table(work.run_dir("night-1") / f"{name}.parquet")
        b = pq.read_table(work.run_dir("night-2") / f"{name}.parquet")
        assert a.num_rows > 0, name
        assert a.equals(b), f"{name} differs between identical nights"


def test_run_artifacts_are_published(two_nights: Any) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    work, (first, _), _ = two_nights
    keys = [artifact_key("night-1", w) for w in ("summary", "disclosure", "policies")]

    async def read() -> list[Any]:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys))
            )
        return list(found)

    artifacts = {a.key: a for a in asyncio.run(read())}
    assert set(artifacts) == set(keys)
    summary = artifacts[keys[0]]
    assert summary.type == "markdown"
    assert "strong" in str(summary.data) and first["report"] in str(summary.data)
    assert artifacts[keys[1]].type == "table"
    # Sent side by side from threads, each still belongs to the report's task run.
    assert all(a.task_run_id is not None and a.flow_run_id for a in artifacts.values())


WIDE = {"COLUMNS": "200"}
"""A terminal wide enough that a table's row is one line (rich reads COLUMNS, not Click's
terminal_width)."""


def test_runs_show_and_report_commands(two_nights: Any) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    work, (first, _), _ = two_nights
    runner = CliRunner()
    base = ["--work-dir", str(work.root)]
    listed = runner.invoke(app, [*base, "runs"], terminal_width=200, env=WIDE)
    assert listed.exit_code == 0, listed.output
    assert "night-1" in listed.output and "night-2" in listed.output
    assert "completed" in listed.output

    shown = runner.invoke(app, [*base, "show", "night-1"], terminal_width=200, env=WIDE)
    assert shown.exit_code == 0, shown.output
    assert "strong · high" in shown.output and "paired" in shown.output
    assert "night-1 · agreement" in shown.output and "alpha across" in shown.output

    report = Path(first["report"])
    report.unlink()
    rebuilt = runner.invoke(app, [*base, "report", "night-1"], terminal_width=200, env=WIDE)
    assert rebuilt.exit_code == 0, rebuilt.output
    assert report.is_file() and "<svg" in report.read_text("utf-8")
    assert 'id="agreement"' in report.read_text("utf-8")

    missing = runner.invoke(app, [*base, "show", "no-such-run"], terminal_width=200, env=WIDE)
    assert missing.exit_code != 0
    assert isinstance(missing.exception, Exception) and "no-such-run" in str(missing.exception)
