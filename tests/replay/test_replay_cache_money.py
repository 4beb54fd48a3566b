"""The replay's money columns price each call with its own recorded prompt-cache hits and
writes: a run against the simulated judge's Anthropic profile, remapped and replayed."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support import stage_plan

from schemas import Pair
from schemas.cost import Price
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.judging.cache import read_replies
from tasks.judging.request import JudgeRequest
from tasks.judging.spend import reply_usd
from tasks.judging.stage import run_judge_stage
from tasks.remap.outcomes import remap_run, write_remap
from tasks.replay.money import outcome_costs
from tasks.replay.stream import replay_file
from tasks.store.workdir import WorkDir

PRICE = Price(
    input=3.0, cached_input=0.3, cache_write=3.75, output=15.0, as_of=dt.date(2026, 11, 30)
)


@pytest.mark.slow
def test_each_policy_pays_its_calls_recorded_cache_hits_and_writes(tmp_path: Path) -> None:
    text = "Each step of the working is shown and checked against the question. " * 55
    pairs = [
        Pair(pair_id=f"p{i}", dataset="long", source="test", question=f"Question {i}?",
             answer_a=f"A{i}. {text}", answer_b=f"B{i}. {text}", key="A")
        for i in range(3)
    ]  # fmt: skip
    staged = stage_plan(WorkDir(tmp_path / "work"), "long", pairs, k=2)
    with SimJudgeServer() as server:
        judge = JudgeSpec(
            name="claude", provider="anthropic", base_url=server.base_url.removesuffix("/v1"),
            model="strong", simulated=True, price=PRICE,
        )  # fmt: skip
        request = JudgeRequest(staged.work, "r1", staged.plan_id, (judge,))
        asyncio.run(run_judge_stage(request))
    write_remap(staged.work, remap_run(staged.work, "r1"))
    outcomes = staged.work.run_dir("r1") / "outcomes.parquet"
    costs = outcome_costs(outcomes)
    assert costs is not None

    # Each call costs its own tokens: a prompt's first call its write, a repeat its read.
    calls = pq.read_table(outcomes, columns=["pair_id", "seed", "order", "call_key"]).to_pylist()
    replies = {r["call_key"]: r for r in read_replies(staged.work).to_pylist()}
    usd = {(r["pair_id"], r["seed"], r["order"]): r["usd"] for r in costs.to_pylist()}
    writes = reads = 0
    for c in calls:
        reply = replies[c["call_key"]]
        own = usd[(c["pair_id"], c["seed"], c["order"])]
        assert own == pytest.approx(reply_usd(PRICE, reply), rel=1e-12)
        writes += bool(reply["cache_write_tokens"])
        reads += bool(reply["cached_prompt_tokens"])
        if reply["cached_prompt_tokens"]:
            assert own < reply_usd(PRICE, reply, prompt_cache=False)
    assert writes == reads == len(calls) // 2  # K = 2: one first call, one repeat per prompt

    # Full sends each call with probability 1/2 under every design: half the pair's calls.
    written = replay_file(outcomes, tmp_path / "replay", costs=costs)
    rows = pq.read_table(written["replay"]).to_pylist()
    for row in (r for r in rows if r["policy"] == "full"):
        mine = [v for (pair, _, _), v in usd.items() if pair == row["pair_id"]]
        assert row["expected_usd"] == pytest.approx(sum(mine) / 2, rel=1e-12)
