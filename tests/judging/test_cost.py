"""Token counts, prices, the estimate before a run and the money a run spent."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import NO_FAULTS, StagedPlan, stage_demo_plan

from schemas.calls import ReplyRecord
from schemas.cost import Price
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.judging.cache import read_replies
from tasks.judging.estimate import estimate_plan, input_tokens
from tasks.judging.prices import AS_OF, builtin_price, price_of
from tasks.judging.providers import AnthropicProvider, OpenAIProvider, Reply
from tasks.judging.spend import reply_usd, run_spend
from tasks.store.workdir import WorkDir

PRICE = Price(input=0.15, cached_input=0.075, output=0.60, as_of=dt.date(2025, 10, 1))


@pytest.fixture(scope="module")
def _stored_plan(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """8 demo pairs, full grid with K = 2: 32 calls per judge config."""
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("staged") / "work"), pairs=8, k=2)


@pytest.fixture
def staged(_stored_plan: StagedPlan, work: WorkDir) -> StagedPlan:
    return _stored_plan.copy_to(work)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer() as srv:
        srv.set_faults(**NO_FAULTS, max_faults_per_request=None)
        yield srv


def _judge(server: SimJudgeServer, **kw: object) -> JudgeSpec:
    spec = {"name": "strong", "base_url": server.base_url, "simulated": True, "model": "strong"}
    return JudgeSpec.model_validate({**spec, "price": PRICE.model_dump(), **kw})


def _judge_run(staged: StagedPlan, run_id: str, judges: list[JudgeSpec]) -> dict[str, object]:
    from tasks.judging.request import JudgeRequest
    from tasks.judging.stage import run_judge_stage

    return asyncio.run(run_judge_stage(JudgeRequest(staged.work, run_id, staged.plan_id, judges)))


def _cache_files(work: WorkDir) -> list[Path]:
    return sorted(p for p in (work.root / "cache").rglob("*") if p.is_file())


def test_estimate_equals_what_the_run_records_and_sends_nothing(
    staged: StagedPlan, server: SimJudgeServer
) -> None:
    judges = [_judge(server)]
    requests_before = len(server.request_log())
    [est] = estimate_plan(staged.work, staged.plan_id, judges, "arena-hard-v1")
    assert _cache_files(staged.work) == [] and len(server.request_log()) == requests_before
    assert (est.planned_calls, est.cached_calls, est.calls_to_send) == (32, 0, 32)
    assert est.output_source == "default" and est.price_as_of == PRICE.as_of
    assert est.usd_low is not None and est.usd_high is not None and est.usd_low < est.usd_high

    counts = _judge_run(staged, "r1", judges)
    replies = read_replies(staged.work).to_pylist()
    assert counts["sent"] == est.calls_to_send == len(replies)
    # The simulated judge bills chars/4 of the messages: the estimate's rule, exactly.
    assert sum(r["prompt_tokens"] for r in replies) == est.input_tokens
    assert all(r["cached_prompt_tokens"] == 0 for r in replies)

    [again] = estimate_plan(staged.work, staged.plan_id, judges, "arena-hard-v1")
    assert (again.cached_calls, again.calls_to_send, again.input_tokens) == (32, 0, 0)
    assert again.output_source == "cached replies (32)"
    mean_out = sum(r["completion_tokens"] for r in replies) / 32
    assert again.output_tokens_per_call == pytest.approx(mean_out)
    assert again.usd_low == again.usd_high == 0.0


def test_a_run_spends_for_sent_calls_only(staged: StagedPlan, server: SimJudgeServer) -> None:
    judges = [_judge(server)]
    _judge_run(staged, "r1", judges)
    [spent] = run_spend(staged.work, "r1")
    replies = read_replies(staged.work).to_pylist()
    usd = sum((r["prompt_tokens"] * 0.15 + r["completion_tokens"] * 0.60) / 1e6 for r in replies)
    assert (spent.sent_calls, spent.cached_calls) == (32, 0)
    assert spent.prompt_tokens == sum(r["prompt_tokens"] for r in replies)
    assert spent.usd == pytest.approx(usd, rel=1e-12) and spent.usd > 0

    _judge_run(staged, "r2", judges)  # every call from the cache
    [cached] = run_spend(staged.work, "r2")
    assert (cached.sent_calls, cached.cached_calls, cached.prompt_tokens) == (0, 32, 0)
    assert cached.usd == 0.0 and cached.price_as_of == PRICE.as_of


def test_usage_details_are_read_from_both_dialects() -> None:
    openai = OpenAIProvider.__new__(OpenAIProvider)
    data = {
        "choices": [{"message": {"content": "A"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 256},
        },
    }
    reply = openai.parse(data, 5.0)
    assert isinstance(reply, Reply)
    assert (reply.prompt_tokens, reply.cached_prompt_tokens) == (1200, 1024)
    assert (reply.completion_tokens, reply.reasoning_tokens) == (300, 256)

    anthropic = AnthropicProvider.__new__(AnthropicProvider)
    data = {
        "content": [{"type": "text", "text": "A"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 50, "cache_read_input_tokens": 1000, "output_tokens": 9},
    }
    reply = anthropic.parse(data, 5.0)
    assert isinstance(reply, Reply)
    # input_tokens excludes cache reads; prompt_tokens counts every prompt token.
    assert (reply.prompt_tokens, reply.cached_prompt_tokens) == (1050, 1000)
    assert reply.reasoning_tokens is None
    # 50 full-price, 1000 cached, 9 output tokens.
    assert PRICE.usd(1050, 9, cached_tokens=1000) == pytest.approx(
        (50 * 0.15 + 1000 * 0.075 + 9 * 0.60) / 1e6
    )


def test_cache_writes_are_read_and_priced_at_their_own_rates() -> None:
    anthropic = AnthropicProvider.__new__(AnthropicProvider)
    data = {
        "content": [{"type": "text", "text": "A"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 8, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 3000,
            "cache_creation": {"ephemeral_5m_input_tokens": 1000,
                               "ephemeral_1h_input_tokens": 2000},
            "output_tokens": 10,
        },
    }  # fmt: skip
    reply = anthropic.parse(data, 5.0)
    assert isinstance(reply, Reply)
    assert (reply.prompt_tokens, reply.cache_write_tokens, reply.cache_write_1h_tokens) == (
        3008, 3000, 2000,
    )  # fmt: skip
    sonnet = builtin_price("claude-sonnet-4-5")
    assert sonnet is not None and (sonnet.cache_write, sonnet.cache_write_1h) == (3.75, 6.00)
    # 8 at $3, 1,000 written for 5 minutes at $3.75, 2,000 for an hour at $6, 10 out at $15.
    paid = (8 * 3 + 1000 * 3.75 + 2000 * 6 + 10 * 15) / 1e6
    assert sonnet.usd(3008, 10, cache_write_tokens=3000, cache_write_1h_tokens=2000) == (
        pytest.approx(paid, rel=1e-12)
    )
    row = {"prompt_tokens": 3008, "completion_tokens": 10, "cache_write_tokens": 3000,
           "cache_write_1h_tokens": 2000, "sent_in_batch": True}  # fmt: skip
    assert reply_usd(sonnet, row) == pytest.approx(paid / 2, rel=1e-12)
    assert reply_usd(sonnet, row, prompt_cache=False) == pytest.approx(
        (3008 * 3 + 10 * 15) / 2e6, rel=1e-12
    )
    # OpenAI bills no writes apart: its prices state none, and writes cost the input price.
    mini = builtin_price("gpt-5-mini")
    assert mini is not None and mini.cache_write is None
    assert mini.usd(2000, 0, cache_write_tokens=2000) == mini.usd(2000, 0)
    # A price recorded before write prices existed dumps (and compares) as it did then.
    assert "cache_write" not in PRICE.model_dump() and "cache_write" in sonnet.model_dump()


def test_reasoning_tokens_take_their_own_price() -> None:
    price = Price(input=1, output=4, reasoning=8, as_of=AS_OF)
    assert price.usd(1_000_000, 1_000_000, reasoning_tokens=250_000) == pytest.approx(1 + 3 + 2)


def test_cache_files_without_token_details_still_read(work: WorkDir) -> None:
    old = pa.table(
        {
            "call_key": ["k1"],
            "provider": ["openai"],
            "model": ["m"],
            "raw_reply": ["A"],
            "finish_reason": ["stop"],
            "prompt_tokens": [10],
            "completion_tokens": [3],
            "latency_ms": [1.0],
            "received_at": pa.array([dt.datetime.now(dt.UTC)], pa.timestamp("us", tz="UTC")),
        }
    )
    pq.write_table(old, work.replies / "old.parquet")
    [row] = read_replies(work).to_pylist()
    assert row["prompt_tokens"] == 10 and row["cached_prompt_tokens"] is None
    assert ReplyRecord.model_validate(row).reasoning_tokens is None
    assert not list(work.quarantine.glob("*"))


def test_builtin_prices_are_dated_defaults_a_judge_overrides() -> None:
    snapshot = builtin_price("gpt-5-mini-2025-08-07")
    assert snapshot is not None and snapshot == builtin_price("gpt-5-mini")
    assert snapshot.as_of == AS_OF and builtin_price("no-such-model") is None
    spec = {"name": "j", "base_url": "https://api.openai.com/v1", "model": "gpt-5-mini"}
    assert price_of(JudgeSpec.model_validate(spec)) == snapshot
    own = JudgeSpec.model_validate({**spec, "price": PRICE.model_dump(mode="json")})
    assert price_of(own) == PRICE
    assert JudgeSpec.model_validate(own.model_dump(mode="json")) == own
    assert "price" not in JudgeSpec.model_validate(spec).model_dump()
    local = {**spec, "profile": "openai_compatible"}
    assert price_of(JudgeSpec.model_validate(local)) is None


def test_input_token_rule() -> None:
    assert (
        input_tokens([{"role": "system", "content": "abc"}, {"role": "user", "content": "de"}]) == 1
    )
