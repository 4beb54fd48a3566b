"""A run fails when its judges do: a wrong key ends the run `failed` (exit 4, the provider's
message, the breaker stop, calls left pending, Prefect flow run Failed) and `rerun-failed`
with the right key completes it; one broken judge of two makes it `degraded` (exit 3); a
judge config with no valid outcome has no score, never 0.5."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from simjudge.server import SimJudgeServer
from tasks.store.workdir import WorkDir
from tasks.warehouse import query

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

KEY = "sk-judgeline-health-5b7c21"
WRONG = "sk-judgeline-wrong-0000"
PAIRS = """question,left,right,label
What is 2+2?,4,5,A
Capital of France?,Paris,Lyon,A
Largest planet?,Mars,Jupiter,B
Boiling point of water in C?,100,90,A
Author of Hamlet?,Marlowe,Shakespeare,B
"""


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(api_key=KEY) as srv:
        yield srv


def _judge(
    server: SimJudgeServer, name: str, key_env: str, model: str = "strong"
) -> dict[str, Any]:
    return {
        "name": name,
        "base_url": server.base_url,
        "model": model,
        "api_key_env": key_env,
        "max_concurrency": 2,
    }


def _config(tmp_path: Path, judges: list[dict[str, Any]]) -> Path:
    csv = tmp_path / "pairs.csv"
    csv.write_text(PAIRS, "utf-8")
    config = {
        "name": "health",
        "datasets": [
            {
                "kind": "table",
                "path": str(csv),
                "mapping": "question=question,answer_a=left,answer_b=right,key=label",
            }
        ],
        "judges": judges,
        "k": 4,
        "designs": ["balanced"],
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config), "utf-8")
    return path


def _invoke(work: WorkDir, *args: str) -> Any:
    from flows.cli import app

    return CliRunner().invoke(app, ["--work-dir", str(work.root), *args], terminal_width=400)


def _record(work: WorkDir, run_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((work.run_dir(run_id) / "record.json").read_text())
    return record


def _flow_run_state(run_id: str) -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    async def read() -> str:
        async with get_client() as client:
            runs = await client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=["nightly-benchmark"]))
            )
        (found,) = [r for r in runs if r.parameters.get("run_id") == run_id]
        assert found.state is not None
        return str(found.state.type.value)

    return asyncio.run(read())


def test_a_wrong_key_fails_the_run_and_rerun_failed_completes_it(
    server: SimJudgeServer, work: WorkDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path, [_judge(server, "gpt-judge", "JUDGELINE_HEALTH_KEY")])
    monkeypatch.setenv("JUDGELINE_HEALTH_KEY", WRONG)
    result = _invoke(work, "run", str(config), "--run-id", "wrong-key")
    out = result.output
    assert result.exit_code == 4, out
    assert "run wrong-key failed: no judge config produced a valid outcome" in out
    # The provider's own words, the breaker stop, and what to do next.
    assert "Incorrect API key provided" in out
    assert "stopped after 3 auth failures in a row (HTTP 401)" in out
    assert "`judgeline rerun-failed wrong-key` after fixing the key" in out
    assert out.index("failed: no judge config") < out.index("score (95% CI)")  # reasons lead
    assert "no valid outcome" in out and "0.500" not in out
    assert WRONG not in out

    record = _record(work, "wrong-key")
    assert record["status"] == "failed"
    (health,) = record["health"]
    assert health["valid"] == 0 and health["stopped"]["category"] == "auth"
    calls = pq.read_table(work.run_dir("wrong-key") / "calls.parquet").to_pylist()
    pending = sum(c["status"] == "pending" for c in calls)
    assert pending > 0 and pending + health["failed"]["auth"] == len(calls) == 40
    assert f"{pending} calls not sent" in out
    trips = record["calls"]["breaker_trips"]
    assert [(t["judge"], t["category"], t["http_status"]) for t in trips] == [
        ("gpt-judge", "auth", 401)
    ]
    # No valid outcome, no score: the all-missing replay's neutral 0.5 is not shown.
    scores = query(work, "report_scores", run_id="wrong-key")
    assert scores["score"].isna().all() and scores["ci_low"].isna().all()
    report = Path(record["report"]).read_text("utf-8")
    assert "no judge config produced a valid outcome" in report
    assert "no valid outcome" in report and "Incorrect API key provided" in report
    assert _flow_run_state("wrong-key") == "FAILED"

    shown = _invoke(work, "show", "wrong-key")
    assert shown.exit_code == 0 and "Incorrect API key provided" in shown.output

    monkeypatch.setenv("JUDGELINE_HEALTH_KEY", KEY)
    server.clear_log()
    rerun = _invoke(work, "rerun-failed", "wrong-key", "--no-progress")
    assert rerun.exit_code == 0, rerun.output
    assert len(server.request_log()) == 40  # the 4 failed and the 36 pending calls
    record = _record(work, "wrong-key")
    assert record["status"] == "completed" and record["health"][0]["valid"] > 0
    assert not query(work, "report_scores", run_id="wrong-key")["score"].isna().any()
    assert "no judge config" not in Path(record["report"]).read_text("utf-8")


def test_one_broken_judge_of_two_degrades_the_run(
    server: SimJudgeServer, work: WorkDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judges = [
        _judge(server, "good", "JUDGELINE_HEALTH_KEY"),
        # Another model: calls of the same model are the same calls, whatever the key.
        _judge(server, "broken", "JUDGELINE_HEALTH_WRONG", model="noisy"),
    ]
    monkeypatch.setenv("JUDGELINE_HEALTH_KEY", KEY)
    monkeypatch.setenv("JUDGELINE_HEALTH_WRONG", WRONG)
    result = _invoke(work, "run", str(_config(tmp_path, judges)), "--run-id", "half")
    out = result.output
    assert result.exit_code == 3, out
    assert "run half degraded: 1 of 2 judge configs" in out
    assert "broken · default: 0/40 valid outcomes; stopped after" in out
    assert "good · default" not in out.split("score (95% CI)")[0]  # only the broken one
    assert _record(work, "half")["status"] == "degraded"
    scores = query(work, "report_scores", run_id="half").set_index("judge")
    assert scores.loc["broken", "score"].isna().all()
    assert scores.loc["good", "score"].notna().all()
    assert _flow_run_state("half") == "FAILED"
