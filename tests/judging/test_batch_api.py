"""Provider batch APIs against the simulated judge: same replies as a direct run, resumed
batches never submitted twice, partial failures, expiry and cancellation rerunnable."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from support import NO_FAULTS, StagedPlan, stage_demo_plan, stage_plan

from schemas import Pair
from schemas.cost import Price
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.judging.batch_api import BatchJournal, PollSchedule, batch_sender, split_lines
from tasks.judging.batch_api.sender import ProviderBatch, await_batch
from tasks.judging.cache import read_replies
from tasks.judging.estimate import estimate_plan
from tasks.judging.request import JudgeRequest, StageHooks
from tasks.judging.spend import run_spend
from tasks.judging.stage import run_judge_stage, unstored_call_keys
from tasks.store.workdir import WorkDir

KEY = "sk-batch-test-77"
FAST = PollSchedule(first_s=0.05, factor=1.5, max_s=0.2)
BATCH_PATHS = {"/v1/batches", "/v1/messages/batches"}


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("staged") / "work"), pairs=6, k=2)


@pytest.fixture()
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(api_key=KEY, require_anthropic_version=True) as srv:
        srv.set_faults(**NO_FAULTS, max_faults_per_request=None)
        yield srv


@pytest.fixture(autouse=True)
def _key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELINE_BATCH_KEY", KEY)


def _judges(server: SimJudgeServer, batch: bool) -> tuple[JudgeSpec, ...]:
    common: dict[str, Any] = {
        "simulated": True,
        "api_key_env": "JUDGELINE_BATCH_KEY",
        "batch": batch,
    }
    gpt = JudgeSpec(name="gpt", base_url=server.base_url, model="strong", **common)
    root = server.base_url.removesuffix("/v1")
    claude = JudgeSpec(
        name="claude", provider="anthropic", base_url=root, model="left-biased", **common
    )
    return gpt, claude


def _stage(staged: StagedPlan, tmp: Path, name: str) -> StagedPlan:
    return staged.copy_to(WorkDir(tmp / name))


def _run(plan: StagedPlan, judges: tuple[JudgeSpec, ...], run_id: str = "r1",
         only: frozenset[str] | None = None, **kw: Any) -> dict[str, Any]:  # fmt: skip
    request = JudgeRequest(plan.work, run_id, plan.plan_id, judges, only_keys=only)
    hooks = StageHooks(sender=lambda r: batch_sender(r, schedule=FAST, **kw))
    return asyncio.run(run_judge_stage(request, hooks=hooks))


def _replies(work: WorkDir) -> list[tuple[Any, ...]]:
    cols = ["call_key", "provider", "model", "raw_reply", "finish_reason", "prompt_tokens",
            "completion_tokens"]  # fmt: skip
    return sorted(tuple(r[c] for c in cols) for r in read_replies(work).to_pylist())


def _calls(work: WorkDir, run_id: str = "r1") -> list[dict[str, Any]]:
    rows = pq.read_table(work.run_dir(run_id) / "calls.parquet").to_pylist()
    return sorted(rows, key=lambda r: (r["call_key"], r["presentation_id"], r["judge"]))


def _submissions(server: SimJudgeServer) -> list[dict[str, Any]]:
    return [e for e in server.request_log() if e["path"] in BATCH_PATHS]


def test_batch_run_stores_exactly_the_replies_of_a_direct_run(
    staged: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    direct, batched = _stage(staged, tmp_path, "direct"), _stage(staged, tmp_path, "batch")
    counts_direct = _run(direct, _judges(server, batch=False))
    server.clear_log()
    counts = _run(batched, _judges(server, batch=True))
    assert counts["stored"] == counts_direct["stored"] == counts["planned"] > 0
    assert _replies(batched.work) == _replies(direct.work)
    assert _calls(batched.work) == _calls(direct.work)
    # One batch per judge, and every call answered once inside it.
    assert sorted(e["path"] for e in _submissions(server)) == sorted(BATCH_PATHS)
    answered = Counter(e["call_key"] for e in server.request_log() if e.get("call_key"))
    assert set(answered.values()) == {1} and len(answered) == counts["unique_keys"]
    assert not BatchJournal(batched.work).open_entries()
    # A second run finds every reply cached and submits nothing.
    again = _run(batched, _judges(server, batch=True))
    assert again["sent_now"] == 0 and len(_submissions(server)) == 2


class Killed(Exception):
    """Stands for the process dying while it waits for its batches."""


async def _die(job: ProviderBatch) -> dict[str, int]:
    raise Killed(job.entry.batch_id)


def test_a_killed_run_polls_its_batches_again_and_submits_nothing_twice(
    staged: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    plan = _stage(staged, tmp_path, "work")
    server.judge.batches.settings.delay_s = 0.5
    with pytest.raises(Killed):
        _run(plan, _judges(server, batch=True), wait=_die)
    submitted = _submissions(server)
    assert len(submitted) == 2
    assert len(BatchJournal(plan.work).open_entries()) == 2
    counts = _run(plan, _judges(server, batch=True))
    assert _submissions(server) == submitted
    assert counts["stored"] == counts["planned"]
    answered = Counter(e["call_key"] for e in server.request_log() if e.get("call_key"))
    assert set(answered.values()) == {1}
    assert not BatchJournal(plan.work).open_entries()


def test_partial_failures_and_expired_requests_are_rerunnable(
    staged: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    plan = _stage(staged, tmp_path, "work")
    server.set_faults(rate_5xx=0.3, max_faults_per_request=1)
    server.judge.batches.settings.expire_after = 10
    counts = _run(plan, _judges(server, batch=True))
    failed = counts["failed_by_category"]
    assert failed.get("expired", 0) > 0 and failed.get("server_error", 0) > 0
    assert counts["stored"] + counts["failed"] == counts["planned"]
    server.judge.batches.settings.expire_after = None
    server.set_faults(rate_5xx=0)
    unstored = unstored_call_keys(plan.work, "r1")
    rerun = _run(plan, _judges(server, batch=True), only=unstored)
    assert rerun["sent_now"] == len(unstored) == counts["failed"]
    assert rerun["sent"] == counts["sent"] == counts["unique_keys"]
    assert rerun["failed"] == 0 and not unstored_call_keys(plan.work, "r1")


def test_cancelled_batches_leave_their_calls_cancelled_for_rerun(
    staged: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    plan = _stage(staged, tmp_path, "work")
    server.judge.batches.settings.delay_s = 30

    async def cancel_then_wait(job: ProviderBatch) -> dict[str, int]:
        api = "messages/batches" if job.entry.provider == "anthropic" else "batches"
        root = server.base_url
        headers = {
            "authorization": f"Bearer {KEY}",
            "x-api-key": KEY,
            "anthropic-version": "2023-06-01",
        }
        async with httpx.AsyncClient() as http:
            answer = await http.post(f"{root}/{api}/{job.entry.batch_id}/cancel", headers=headers)
            assert answer.status_code == 200, answer.text
        return await await_batch(job)

    counts = _run(plan, _judges(server, batch=True), wait=cancel_then_wait)
    assert counts["failed_by_category"] == {"cancelled": counts["planned"]}
    server.judge.batches.settings.delay_s = 0
    rerun = _run(plan, _judges(server, batch=True), only=unstored_call_keys(plan.work, "r1"))
    assert rerun["stored"] == counts["planned"]


def test_batches_are_cut_within_the_api_limits() -> None:
    lines = [{"custom_id": f"c{i}", "body": "x" * 50} for i in range(10)]
    by_count = split_lines(lines, max_requests=4, max_bytes=10**6)
    assert [len(b) for b in by_count] == [4, 4, 2]
    one = len(b'{"custom_id": "c0", "body": "' + b"x" * 50 + b'"}\n')
    by_size = split_lines(lines, max_requests=100, max_bytes=int(3 * one / 0.98) + 1)
    assert [len(b) for b in by_size] == [3, 3, 3, 1]
    assert [line for batch in by_size for line in batch] == lines


def test_batch_needs_an_openai_or_anthropic_profile() -> None:
    with pytest.raises(ValueError, match="batch: true needs profile openai, openai-responses or"):
        JudgeSpec(
            name="j", profile="openai_compatible", base_url="http://x/v1", model="m", batch=True
        )
    spec = JudgeSpec(name="j", base_url="http://x/v1", model="m")
    assert "batch" not in spec.model_dump()  # runs recorded before batches read the same


def test_a_batch_judge_is_billed_at_its_batch_discount(
    staged: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    price = Price(input=1.0, output=4.0, batch_discount=0.5, as_of=dt.date(2025, 10, 1))
    priced = [j.model_copy(update={"price": price}) for j in _judges(server, batch=False)]
    in_batch = [j.model_copy(update={"batch": True}) for j in priced]
    direct, batched = _stage(staged, tmp_path, "direct"), _stage(staged, tmp_path, "batch")
    ahead = {
        e.judge: e for e in estimate_plan(batched.work, batched.plan_id, in_batch, "arena-hard-v1")
    }
    ahead_direct = {
        e.judge: e for e in estimate_plan(direct.work, direct.plan_id, priced, "arena-hard-v1")
    }
    _run(direct, tuple(priced))
    _run(batched, tuple(in_batch))
    flags = Counter(r["sent_in_batch"] for r in read_replies(batched.work).to_pylist())
    assert set(flags) == {True} and set(
        Counter(r["sent_in_batch"] for r in read_replies(direct.work).to_pylist())
    ) == {None}
    paid = {s.judge: s.usd for s in run_spend(direct.work, "r1")}
    halved = {s.judge: s.usd for s in run_spend(batched.work, "r1")}
    assert set(paid) == set(halved) == {"gpt", "claude"}
    for judge, usd in paid.items():
        assert usd is not None and usd > 0 and halved[judge] == pytest.approx(usd / 2, rel=1e-12)
        assert ahead[judge].usd_low == pytest.approx(ahead_direct[judge].usd_low / 2, rel=1e-12)


def test_batch_replies_keep_their_reasoning_and_cached_prompt_tokens(
    staged: StagedPlan, tmp_path: Path
) -> None:
    """The same calls of a reasoning model, direct and through the batch API, record the same
    reasoning tokens, and both record the cached prompt tokens the usage reports."""
    personas = [Persona(name="o4-mini", skill=0.9)]
    with SimJudgeServer(personas, api_key=KEY) as srv:
        judge = JudgeSpec(
            name="o4", base_url=srv.base_url, model="o4-mini", reasoning=True, simulated=True,
            api_key_env="JUDGELINE_BATCH_KEY",
        )  # fmt: skip
        direct, batched = _stage(staged, tmp_path, "direct"), _stage(staged, tmp_path, "batch")
        _run(direct, (judge,))
        _run(batched, (judge.model_copy(update={"batch": True}),))
    cols = ["reasoning_tokens", "cached_prompt_tokens"]
    sent = {r["call_key"]: [r[c] for c in cols] for r in read_replies(direct.work).to_pylist()}
    came = {r["call_key"]: [r[c] for c in cols] for r in read_replies(batched.work).to_pylist()}
    assert sent.keys() == came.keys() and len(sent) > 0
    assert all(reasoning > 0 for reasoning, _ in sent.values())
    assert [v[0] for k, v in sorted(came.items())] == [v[0] for k, v in sorted(sent.items())]
    assert all(cached is not None for _, cached in came.values())
    spent = {s.judge: s.reasoning_tokens for s in run_spend(batched.work, "r1")}
    assert spent["o4"] == sum(v[0] for v in sent.values())


def _long_pairs(n: int) -> list[Pair]:
    """Pairs whose prompts are about 2,000 tokens: long enough for every prompt cache."""
    text = "Each step of the working is shown and checked against the question. " * 55
    return [
        Pair(pair_id=f"long-{i}", dataset="long", source="test", question=f"Question {i}?",
             answer_a=f"A{i}. {text}", answer_b=f"B{i}. {text}", key="A")
        for i in range(n)
    ]  # fmt: skip


def test_both_batch_apis_take_the_caching_fields(server: SimJudgeServer, tmp_path: Path) -> None:
    plan = stage_plan(WorkDir(tmp_path / "work"), "long", _long_pairs(3), k=2)
    counts = _run(plan, _judges(server, batch=True))
    assert counts["stored"] == counts["planned"] == 2 * 3 * 4
    bodies = {job.api: [body for _, body in job.requests]
              for job in server.judge.batches.jobs.values()}  # fmt: skip
    assert all(b["prompt_cache_key"].startswith("judgeline-") for b in bodies["openai"])
    # `auto` marks nothing for Anthropic in a batch: each request would pay a write.
    assert all(isinstance(b["messages"][-1]["content"], str) for b in bodies["anthropic"])
    # Batch replies record what the provider's cache did (here: repeats after their first).
    replies = read_replies(plan.work).to_pylist()
    assert all(r["cached_prompt_tokens"] is not None for r in replies)
    spent = {s.judge: s for s in run_spend(plan.work, "r1")}
    assert spent["claude"].cache_write_tokens == 0 == spent["claude"].cached_prompt_tokens
    assert spent["gpt"].cached_prompt_tokens > 0
    # `1h`, asked for, marks every request of a batch.
    server.judge.batches.jobs.clear()
    hour = _judges(server, batch=True)[1].model_copy(update={"prompt_cache": "1h"})
    _run(stage_plan(WorkDir(tmp_path / "hour"), "long", _long_pairs(3), k=2), (hour,))
    [job] = server.judge.batches.jobs.values()
    for _, body in job.requests:
        [block] = body["messages"][-1]["content"]
        assert block["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


@pytest.mark.slow
def test_a_responses_api_judge_batches_responses_lines(
    staged: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    """A Responses API judge's batch runs `/v1/responses` lines and stores the replies a
    direct run stores."""
    direct, batched = _stage(staged, tmp_path, "direct"), _stage(staged, tmp_path, "batch")
    judge = JudgeSpec(
        name="responses", profile="openai-responses", base_url=server.base_url, model="strong",
        simulated=True, api_key_env="JUDGELINE_BATCH_KEY", verdict="json",
    )  # fmt: skip
    counts_direct = _run(direct, (judge,))
    server.clear_log()
    counts = _run(batched, (judge.model_copy(update={"batch": True}),))
    assert counts["stored"] == counts_direct["stored"] == counts["planned"] > 0
    assert _replies(batched.work) == _replies(direct.work)
    assert len([e for e in server.request_log() if e["path"] == "/v1/batches"]) == 1
    # The batch's endpoint is /v1/responses: its lines must POST there, and are answered so.
    answered = [e for e in server.request_log() if e.get("call_key")]
    assert {e["path"] for e in answered} == {"/v1/responses"}
    assert {e["fields"]["store"] for e in answered} == {False}
