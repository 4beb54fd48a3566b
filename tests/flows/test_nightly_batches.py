"""The nightly flow with `batch: true` judges over loopback: OpenAI Batch and Anthropic
Message Batches of the simulated judge, the report and replay written, a rerun paying nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flows.nightly import nightly_flow
from schemas.config import DatasetSpec, RunConfig
from schemas.cost import Price
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.judging.batch_api import BatchJournal
from tasks.judging.cache import read_replies
from tasks.judging.spend import run_spend
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow
BATCH_PATHS = {"/v1/batches": "gpt", "/v1/messages/batches": "claude"}
PRICE = Price(input=1.0, output=4.0, batch_discount=0.5, as_of=dt.date(2026, 11, 30))


def _config(server: SimJudgeServer) -> RunConfig:
    common: dict[str, Any] = {"simulated": True, "batch": True, "price": PRICE}
    judges = [
        JudgeSpec(name="gpt", base_url=server.base_url, model="strong", **common),
        JudgeSpec(
            name="claude",
            provider="anthropic",
            base_url=server.base_url.removesuffix("/v1"),
            model="left-biased",
            **common,
        ),
    ]
    demo = [DatasetSpec(kind="demo")]
    return RunConfig(name="nightly-batches", datasets=demo, judges=judges, k=2)


def _night(config: RunConfig, work: WorkDir, run_id: str) -> dict[str, Any]:
    record: dict[str, Any] = asyncio.run(
        nightly_flow(config=config.model_dump(mode="json"), work_dir=str(work.root), run_id=run_id)
    )
    return record


@pytest.fixture(scope="module")
def two_nights(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same batch configuration run twice on one work dir, with the judge's log of each."""
    work = WorkDir(tmp_path_factory.mktemp("nightly-batches") / "work")
    with SimJudgeServer() as server:
        config = _config(server)
        records, logs = [], []
        for night in ("night-1", "night-2"):
            server.clear_log()
            records.append(_night(config, work, night))
            logs.append(server.request_log())
        batched = {cid for job in server.judge.batches.jobs.values() for cid, _ in job.requests}
        jobs = Counter(job.api for job in server.judge.batches.jobs.values())
    return {"work": work, "records": records, "logs": logs, "batched": batched, "jobs": jobs}


def test_a_batch_night_sends_every_call_in_provider_batches(two_nights: dict[str, Any]) -> None:
    first, log = two_nights["records"][0], two_nights["logs"][0]
    assert first["status"] == "completed"
    planned = first["calls"]["planned"]
    assert planned == 150 * 2 * 2 * 2  # demo pairs x K seeds x 2 orders x 2 judges
    assert sum(first["outcomes"].values()) == planned
    # One provider batch per judge, each submitted once, on each API's own batch endpoint.
    submitted = [e for e in log if e["path"] in BATCH_PATHS]
    assert sorted(e["path"] for e in submitted) == sorted(BATCH_PATHS)
    assert two_nights["jobs"] == {"openai": 1, "anthropic": 1}
    # Every judge call the simulated judge answered was a request of one of those batches.
    answered = Counter(e["call_key"] for e in log if e.get("call_key"))
    assert set(answered.values()) == {1} and set(answered) == two_nights["batched"]
    assert sum(e["requests"] for e in submitted) == len(answered) == first["calls"]["sent"] > 0
    work = two_nights["work"]
    replies = read_replies(work).to_pylist()
    assert replies and all(r["sent_in_batch"] for r in replies)
    assert not BatchJournal(work).open_entries()


def test_a_batch_night_writes_its_report_and_replay(two_nights: dict[str, Any]) -> None:
    first, work = two_nights["records"][0], two_nights["work"]
    assert Path(first["report"]).is_file()
    replay = pq.read_table(work.run_dir("night-1") / "replay.parquet")
    assert replay.num_rows > 0
    assert set(replay.column("judge").to_pylist()) == {"gpt", "claude"}
    spend = run_spend(work, "night-1")
    assert {s.judge for s in spend} == {"gpt", "claude"}
    assert all(s.sent_calls > 0 and s.usd is not None and s.usd > 0 for s in spend)
    # Billed at the batch discount: half what the same tokens cost sent one by one.
    for s in spend:
        listed = PRICE.usd(
            s.prompt_tokens, s.completion_tokens, s.cached_prompt_tokens, s.reasoning_tokens
        )
        assert s.usd == pytest.approx(listed * 0.5)


def test_a_rerun_of_the_batch_night_pays_nothing(two_nights: dict[str, Any]) -> None:
    (first, second), (_, log) = two_nights["records"], two_nights["logs"]
    work = two_nights["work"]
    assert second["status"] == "completed"
    assert second["calls"]["sent"] == 0 and log == []
    assert second["outcomes"] == first["outcomes"]
    spend = run_spend(work, "night-2")
    assert all(s.sent_calls == 0 and s.usd == 0 and s.cached_calls > 0 for s in spend)
    for name in ("outcomes", "replay"):
        a = pq.read_table(work.run_dir("night-1") / f"{name}.parquet")
        b = pq.read_table(work.run_dir("night-2") / f"{name}.parquet")
        assert a.equals(b), f"{name} differs between identical nights"
