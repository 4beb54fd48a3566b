"""Provider prompt caching across the K repeats: request bodies, the order calls go out in,
money that knows it, and call keys that never change with it."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import StagedPlan, stage_plan

from schemas.cost import Price
from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.ingest.loaders import load_judgebench
from tasks.judging.batch_api import PollSchedule, batch_sender
from tasks.judging.batches import split_batches
from tasks.judging.cache import read_replies
from tasks.judging.estimate import estimate_plan
from tasks.judging.planned import PlannedCall, plan_calls
from tasks.judging.prompt_cache import (
    hit_tokens,
    min_cacheable_tokens,
    prompt_cache_key,
    write_tokens,
)
from tasks.judging.providers import PROVIDERS
from tasks.judging.request import JudgeRequest, StageHooks
from tasks.judging.spend import run_spend
from tasks.judging.stage import run_judge_stage
from tasks.store.workdir import WorkDir

JUDGEBENCH = "judgebench/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
TEMPLATE = "arena-hard-v1"
OPENAI_PRICE = Price(input=0.25, cached_input=0.025, output=0.0, as_of=dt.date(2026, 11, 30))
CLAUDE_PRICE = Price(
    input=3.0, cached_input=0.30, cache_write=3.75, cache_write_1h=6.0, output=0.0,
    as_of=dt.date(2026, 11, 30),
)  # fmt: skip
"""Output at $0: the USD is the input's, what the cache changes."""
FAST_POLLS = PollSchedule(first_s=0.05, factor=1.5, max_s=0.2)


@pytest.fixture(scope="module")
def judgebench(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """12 JudgeBench pairs (prompts of 1,300 to 2,800 tokens), full grid, K = 4."""
    pairs = load_judgebench(shared_data / JUDGEBENCH)[:12]
    return stage_plan(WorkDir(tmp_path_factory.mktemp("jb") / "work"), "jb", pairs, k=4)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    personas = [Persona(name="strong", skill=0.9), Persona(name="thinks", latency_ms=40),
                Persona(name="gpt-5.6-terra", latency_ms=40),
                Persona(name="gpt-5.6-luna", latency_ms=40)]  # fmt: skip
    with SimJudgeServer(personas) as srv:
        yield srv


def _judges(server: SimJudgeServer, model: str = "strong", **kw: Any) -> list[JudgeSpec]:
    common = {"simulated": True, "model": model, **kw}
    root = server.base_url.removesuffix("/v1")
    return [
        JudgeSpec.model_validate(
            {"name": "gpt", "base_url": server.base_url, "price": OPENAI_PRICE, **common}
        ),
        JudgeSpec.model_validate(
            {"name": "claude", "provider": "anthropic", "base_url": root, "price": CLAUDE_PRICE,
             **common}
        ),
    ]  # fmt: skip


def _planned(staged: StagedPlan, judges: list[JudgeSpec]) -> list[PlannedCall]:
    return plan_calls(staged.manifest, staged.presentations, judges, TEMPLATE, "r")


def _run(staged: StagedPlan, judges: list[JudgeSpec], run_id: str = "r1") -> dict[str, Any]:
    request = JudgeRequest(staged.work, run_id, staged.plan_id, tuple(judges), TEMPLATE)
    return asyncio.run(run_judge_stage(request))


def _body(call: PlannedCall) -> dict[str, Any]:
    provider = PROVIDERS[call.judge.provider](call.judge, None, None)  # type: ignore[arg-type]
    return provider.body(call.request())


def test_request_bodies_carry_the_caching_fields_and_keys_do_not(
    judgebench: StagedPlan, server: SimJudgeServer
) -> None:
    gpt, claude = _judges(server)
    calls = _planned(judgebench, [gpt, claude])
    by_prompt: dict[tuple[str, str, str], list[PlannedCall]] = defaultdict(list)
    for c in calls:
        by_prompt[c.prompt].append(c)
    assert len(by_prompt) == 2 * 12 * 2 and {len(v) for v in by_prompt.values()} == {4}
    keys: set[str] = set()
    for prompt, repeats in by_prompt.items():
        bodies = [_body(c) for c in repeats]
        if prompt[0] == "gpt":
            # One prompt_cache_key per presentation's prompt, the same for its K seeds.
            assert {b["prompt_cache_key"] for b in bodies} == {prompt_cache_key(prompt[2])}
            keys.add(bodies[0]["prompt_cache_key"])
            assert len(bodies[0]["prompt_cache_key"]) <= 64
        else:
            # One breakpoint, on the prompt's last block: the repeats share all of it.
            for body in bodies:
                [user] = body["messages"]
                [block] = user["content"]
                assert block["cache_control"] == {"type": "ephemeral"}
                assert block["text"] == repeats[0].messages[-1]["content"]
                assert isinstance(body["system"], str) and "cache_control" not in body
    assert len(keys) == 24  # both orders of 12 pairs
    # Call keys are those of a judge that caches nothing; `1h` marks an hour-long breakpoint.
    for spec in (gpt, claude):
        off = spec.model_copy(update={"prompt_cache": "off"})
        plain = _planned(judgebench, [off])
        assert [c.call_key for c in plain] == [c.call_key for c in _planned(judgebench, [spec])]
        assert "prompt_cache_key" not in _body(plain[0])
        assert isinstance(_body(plain[0])["messages"][-1]["content"], str)
    hour = claude.model_copy(update={"prompt_cache": "1h"})
    mark = _body(_planned(judgebench, [hour])[0])["messages"][-1]["content"][0]["cache_control"]
    assert mark == {"type": "ephemeral", "ttl": "1h"}


def test_other_profiles_get_no_field_and_a_judges_own_extra_wins() -> None:
    messages = ({"role": "system", "content": "s"}, {"role": "user", "content": "u"})
    config = ReasoningConfig(name="c")
    for profile, url in (
        ("openai_compatible", "http://localhost:8000/v1"),
        ("azure", "https://r.openai.azure.com/openai/v1/"),
    ):
        spec = JudgeSpec(name="j", profile=profile, base_url=url, model="m")  # type: ignore[arg-type]
        from tasks.judging.endpoints import openai_body

        assert "prompt_cache_key" not in openai_body(spec, config, messages, 0)
        assert min_cacheable_tokens(spec) is None and hit_tokens(spec, 5000) == 0
    own = JudgeSpec(name="j", base_url="http://x/v1", model="m",
                    extra={"prompt_cache_key": "mine"})  # fmt: skip
    from tasks.judging.endpoints import openai_body

    assert openai_body(own, config, messages, 0)["prompt_cache_key"] == "mine"
    with pytest.raises(ValueError, match="prompt_cache: 1h is Anthropic"):
        JudgeSpec(name="j", base_url="http://x/v1", model="m", prompt_cache="1h")


def test_minimum_cacheable_lengths_follow_the_vendors() -> None:
    def claude(model: str) -> JudgeSpec:
        return JudgeSpec(name="c", provider="anthropic", base_url="http://x", model=model)

    assert min_cacheable_tokens(claude("claude-haiku-4-5-20251001")) == 4096
    assert min_cacheable_tokens(claude("claude-opus-4-5")) == 4096
    assert min_cacheable_tokens(claude("claude-opus-4-1")) == 1024
    assert min_cacheable_tokens(claude("claude-opus-5")) == 512
    assert min_cacheable_tokens(claude("claude-sonnet-4-5")) == 1024
    assert min_cacheable_tokens(claude("some-proxy-model")) == 1024
    gpt = JudgeSpec(name="g", base_url="https://api.openai.com/v1", model="gpt-5-mini")
    assert [hit_tokens(gpt, n) for n in (1023, 1024, 1151, 1152, 2000)] == [
        0, 1024, 1024, 1152, 1920,
    ]  # fmt: skip
    assert hit_tokens(claude("claude-haiku-4-5"), 2000) == 0
    assert hit_tokens(claude("claude-sonnet-4-5"), 2000) == 2000


def test_repeats_of_a_prompt_stay_in_one_batch_behind_its_first_call(
    judgebench: StagedPlan, server: SimJudgeServer
) -> None:
    gpt, _ = _judges(server)
    calls = _planned(judgebench, [gpt])
    batches = split_batches(calls[::-1], batch_size=10)
    assert [len(b.calls) for b in batches] == [8] * 12  # two prompts of 4 per batch of 10
    for batch in batches:
        assert len({c.prompt for c in batch.calls}) == 2
    # Without prompt caching, the old cut: every 10 calls, in call order.
    off = _planned(judgebench, [gpt.model_copy(update={"prompt_cache": "off"})])
    assert [len(b.calls) for b in split_batches(off, 10)] == [10] * 9 + [6]
    # A prompt larger than a batch is cut.
    assert [len(b.calls) for b in split_batches(calls[:8], 3)] == [3, 1, 3, 1]


def test_a_run_caches_every_repeat_and_the_estimate_knows_it(
    judgebench: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    """JudgeBench at K = 4, both model profiles: each repeat waits for its prompt's first
    answer (the judge thinks 40 ms: repeats sent together would miss), so at least 70% of
    the repeats' prompt tokens are billed as cached and the input USD is at most 40% of the
    uncached (44% for Anthropic after its cache writes); the estimate is within 10%."""
    staged = judgebench.copy_to(WorkDir(tmp_path / "work"))
    judges = _judges(server, model="thinks")
    ahead = {e.judge: e for e in estimate_plan(staged.work, staged.plan_id, judges, TEMPLATE)}
    counts = _run(staged, judges)
    assert counts["stored"] == counts["planned"] == 2 * 12 * 8
    replies = {r["call_key"]: r for r in read_replies(staged.work).to_pylist()}
    spend = {s.judge: s for s in run_spend(staged.work, "r1")}
    for spec in judges:
        first: dict[tuple[str, str, str], str] = {}
        repeats = cached = 0
        for c in sorted(_planned(staged, [spec]), key=lambda c: replies[c.call_key]["received_at"]):
            reply = replies[c.call_key]
            if c.prompt not in first:
                first[c.prompt] = c.call_key
                assert not reply["cached_prompt_tokens"]
                continue
            repeats += reply["prompt_tokens"]
            cached += reply["cached_prompt_tokens"] or 0
        assert cached >= 0.7 * repeats, spec.name
        row = spend[spec.name]
        assert row.usd is not None and row.prompt_cache_saved_usd is not None
        uncached = row.usd + row.prompt_cache_saved_usd
        assert row.usd <= (0.40 if spec.provider == "openai" else 0.44) * uncached, spec.name
        est = ahead[spec.name]
        assert est.input_tokens == row.prompt_tokens
        assert est.usd_low == pytest.approx(row.usd, rel=0.10)
        assert est.uncached_usd_low == pytest.approx(uncached, rel=1e-9)
        assert est.cached_share == pytest.approx(row.cached_prompt_tokens / row.prompt_tokens, 0.1)
        assert est.cache_write_tokens == pytest.approx(row.cache_write_tokens, rel=0.10)
    assert spend["claude"].cache_write_tokens > 0 and spend["gpt"].cache_write_tokens == 0

    # Switching caching off re-sends nothing: the replies are the same calls.
    off = [j.model_copy(update={"prompt_cache": "off"}) for j in judges]
    assert _run(staged, off, "r2")["sent"] == 0


def test_a_batch_judge_pays_no_cache_write_it_cannot_read_and_the_estimate_counts_them(
    judgebench: StagedPlan, tmp_path: Path
) -> None:
    """A batch's requests run together: none reads what another wrote. Claude as a batch
    judge with `auto` used to mark every request, each paying a write (above `off`), while
    the estimate said 0 writes: now `auto` marks nothing and pays what `off` pays, and `1h`
    (asked for) is estimated with the write every call pays."""
    with SimJudgeServer([Persona(name="thinks", latency_ms=40)]) as server:  # a cold cache
        _batch_runs(judgebench, server, tmp_path)


def _batch_runs(judgebench: StagedPlan, server: SimJudgeServer, tmp_path: Path) -> None:
    claude = _judges(server, model="thinks", batch=True)[1]
    for cache in ("auto", "1h"):
        staged = judgebench.copy_to(WorkDir(tmp_path / cache))
        judge = claude.model_copy(update={"prompt_cache": cache})
        [est] = estimate_plan(staged.work, staged.plan_id, [judge], TEMPLATE)
        request = JudgeRequest(staged.work, "r1", staged.plan_id, (judge,), TEMPLATE)
        hooks = StageHooks(sender=lambda r: batch_sender(r, schedule=FAST_POLLS))
        counts = asyncio.run(run_judge_stage(request, hooks=hooks))
        assert counts["stored"] == counts["planned"] == 12 * 8
        [spent] = run_spend(staged.work, "r1")
        replies = read_replies(staged.work).to_pylist()
        assert all(r["sent_in_batch"] for r in replies) and spent.cached_prompt_tokens == 0
        assert spent.usd is not None and spent.prompt_cache_saved_usd is not None
        assert est.usd_low is not None and est.uncached_usd_low is not None
        if cache == "auto":
            assert spent.cache_write_tokens == 0 and spent.prompt_cache_saved_usd == 0
            assert est.cache_write_tokens == 0 and est.usd_low == est.uncached_usd_low
        else:
            # Every call wrote its whole prompt (at the 1-hour price): caching cost money.
            assert spent.cache_write_tokens == spent.prompt_tokens
            assert spent.prompt_cache_saved_usd < 0
            assert est.cache_write_tokens == pytest.approx(spent.cache_write_tokens, rel=0.10)
            assert est.usd_low == pytest.approx(spent.usd, rel=0.10)
            assert est.usd_low > est.uncached_usd_low


def test_the_readmes_batch_judges_pay_no_cache_write() -> None:
    """The README's batch example was Claude with `prompt_cache: 1h`: every request wrote
    the cache at the 1-hour price and none read it (29% above `off`)."""
    from tests.judging.test_readme_judges import OTHER_BLOCKS

    batch = [JudgeSpec.model_validate(j) for j in OTHER_BLOCKS["provider-batch-apis-half-price"]]
    assert {j.provider for j in batch} == {"openai", "anthropic"} and all(j.batch for j in batch)
    for spec in batch:
        assert write_tokens(spec, 5000) == 0, spec.name


GPT56_PRICE = Price(
    input=5.0, cached_input=0.5, cache_write=6.25, output=0.0, as_of=dt.date(2026, 12, 2)
)


@pytest.mark.slow
def test_gpt_5_6_cache_writes_are_read_priced_and_estimated(
    judgebench: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    """A gpt-5.6-style judge (chat completions and the Responses API): its requests carry
    `prompt_cache_options`, each prompt's first call reports the tokens it wrote, the spend
    prices them at the write price, and the estimate agrees within 10%."""
    staged = judgebench.copy_to(WorkDir(tmp_path / "work"))
    common = {"simulated": True, "reasoning": True, "base_url": server.base_url,
              "price": GPT56_PRICE}  # fmt: skip
    # Two models: one model's cache would serve the other judge's identical prompts.
    judges = [
        JudgeSpec.model_validate({"name": "chat", "model": "gpt-5.6-terra", **common}),
        JudgeSpec.model_validate(
            {"name": "responses", "profile": "openai-responses", "model": "gpt-5.6-luna",
             **common}
        ),
    ]  # fmt: skip
    for call in _planned(staged, judges)[:2]:
        assert _body(call)["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    ahead = {e.judge: e for e in estimate_plan(staged.work, staged.plan_id, judges, TEMPLATE)}
    counts = _run(staged, judges)
    assert counts["stored"] == counts["planned"]
    spend = {s.judge: s for s in run_spend(staged.work, "r1")}
    for spec in judges:
        row, est = spend[spec.name], ahead[spec.name]
        assert row.cache_write_tokens > 0 and row.usd is not None
        without_premium = GPT56_PRICE.model_copy(update={"cache_write": None})
        plain = without_premium.usd(
            row.prompt_tokens, 0, cached_tokens=row.cached_prompt_tokens,
            cache_write_tokens=row.cache_write_tokens,
        )  # fmt: skip
        premium = row.cache_write_tokens * (6.25 - 5.0) / 1e6
        assert row.usd == pytest.approx(plain + premium, rel=1e-9), spec.name
        assert est.cache_write_tokens == pytest.approx(row.cache_write_tokens, rel=0.10)
        assert est.usd_low == pytest.approx(row.usd, rel=0.10), spec.name
