"""The judge client over loopback against the simulated judge: replies, faults, limits."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterator

import pytest
from support import NO_FAULTS

from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from simjudge.persona import PRESETS, Persona
from simjudge.server import SimJudgeServer
from tasks.judging import client as client_module
from tasks.judging import pacing
from tasks.judging.client import CallResult, JudgeClient
from tasks.judging.pacing import RetryPolicy
from tasks.judging.providers import (
    PROVIDERS,
    AnthropicProvider,
    CallFailure,
    CallRequest,
    OpenAIProvider,
)
from tasks.prompts.templates import render

KEY = "sk-judgeline-test-9f3b7c1e"
PROMPT = render("arena-hard-v1", question="What is 2+2?", left="4", right="5")
SLOW = Persona(name="slow", skill=0.9, latency_ms=100)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer((*PRESETS, SLOW), api_key=KEY) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server: SimJudgeServer) -> Iterator[None]:
    server.set_faults(**NO_FAULTS, max_faults_per_request=None, retry_after_s=1)
    server.clear_log()
    yield


def _spec(server: SimJudgeServer, **kw: object) -> JudgeSpec:
    base: dict[str, object] = {
        "name": "j", "base_url": server.base_url, "model": "strong", "simulated": True,
    }  # fmt: skip
    base.update(kw)
    return JudgeSpec.model_validate(base)


def _request(i: int = 0, seed: int = 0) -> CallRequest:
    return CallRequest(
        call_key=f"key-{i}-{seed}",
        messages=PROMPT.messages,
        seed=seed,
        config=ReasoningConfig(name="d"),
    )


def _send(
    spec: JudgeSpec,
    requests: list[CallRequest],
    *,
    key: str | None = KEY,
    retry: RetryPolicy | None = None,
) -> list[CallResult]:
    async def go() -> list[CallResult]:
        async with JudgeClient(spec, key, run_id="run-t", retry=retry) as client:
            return list(await asyncio.gather(*(client.send(r) for r in requests)))

    return asyncio.run(go())


def test_openai_round_trip_records_reply_usage_and_call_key(server: SimJudgeServer) -> None:
    [result] = _send(_spec(server), [_request(1, seed=3)])
    assert result.failure is None and result.reply is not None
    reply = result.reply
    assert reply.call_key == "key-1-3" and reply.provider == "openai" and reply.model == "strong"
    assert reply.raw_reply and reply.finish_reason == "stop"
    assert reply.prompt_tokens and reply.prompt_tokens > 10 and reply.completion_tokens
    assert reply.latency_ms > 0
    [attempt] = result.attempts
    assert attempt.ok and attempt.attempt == 1 and attempt.run_id == "run-t"
    [entry] = server.request_log()
    assert entry["path"] == "/v1/chat/completions" and entry["call_key"] == "key-1-3"


def test_anthropic_round_trip(server: SimJudgeServer) -> None:
    results = _send(_spec(server, provider="anthropic"), [_request(2, s) for s in range(3)])
    assert all(r.reply is not None for r in results)
    assert {r.reply.provider for r in results if r.reply} == {"anthropic"}
    assert all(r.reply and r.reply.finish_reason == "end_turn" for r in results)
    assert all(r.reply and r.reply.completion_tokens for r in results)
    log = server.request_log()
    assert [e["path"] for e in log] == ["/v1/messages"] * 3
    assert sorted(e["call_key"] for e in log) == [f"key-2-{s}" for s in range(3)]


def test_wrong_key_is_an_auth_failure_without_retry_and_without_the_key(
    server: SimJudgeServer,
) -> None:
    wrong = "sk-wrong-key-5d1e0a"
    [result] = _send(_spec(server, max_retries=3), [_request()], key=wrong)
    assert result.reply is None and result.failure is not None
    assert result.failure.category == "auth" and result.failure.http_status == 401
    assert len(result.attempts) == 1
    assert all(
        wrong not in (a.detail or "") and KEY not in (a.detail or "") for a in result.attempts
    )


def test_unknown_model_is_a_bad_request(server: SimJudgeServer) -> None:
    [result] = _send(_spec(server, model="nope"), [_request()])
    assert result.failure is not None and result.failure.category == "bad_request"
    assert result.failure.http_status == 404


def test_retry_after_is_honoured(server: SimJudgeServer) -> None:
    server.set_faults(rate_429=1.0, retry_after_s=1, max_faults_per_request=1)
    # The fault budget counts per distinct request body: use a seed no other test uses.
    [result] = _send(
        _spec(server), [_request(seed=101)], retry=RetryPolicy(max_retries=2, base_s=0.01)
    )
    assert result.reply is not None
    assert [a.error_category for a in result.attempts] == ["rate_limited", None]
    assert result.attempts[0].http_status == 429
    times = [dt.datetime.fromisoformat(e["time"]) for e in server.request_log()]
    assert len(times) == 2
    assert (times[1] - times[0]).total_seconds() >= 1.0
    gap = result.attempts[1].started_at - result.attempts[0].started_at
    assert gap.total_seconds() >= 1.0


def test_server_errors_are_retried_then_succeed(server: SimJudgeServer) -> None:
    server.set_faults(rate_5xx=1.0, max_faults_per_request=2)
    [result] = _send(
        _spec(server), [_request(seed=102)], retry=RetryPolicy(max_retries=3, base_s=0.01)
    )
    assert result.reply is not None
    assert [a.error_category for a in result.attempts] == ["server_error", "server_error", None]
    assert {a.http_status for a in result.attempts[:2]} <= {500, 502, 503}


def test_retries_exhausted_keep_the_last_failure(server: SimJudgeServer) -> None:
    server.set_faults(rate_5xx=1.0)
    [result] = _send(_spec(server), [_request()], retry=RetryPolicy(max_retries=2, base_s=0.01))
    assert result.reply is None and result.failure is not None
    assert result.failure.category == "server_error"
    assert [a.attempt for a in result.attempts] == [1, 2, 3]
    assert not any(a.ok for a in result.attempts)


def test_timeout_is_classified(server: SimJudgeServer) -> None:
    server.set_faults(rate_stall=1.0, stall_s=3)
    started = time.perf_counter()
    [result] = _send(_spec(server, timeout_s=0.3, max_retries=0), [_request()])
    assert time.perf_counter() - started < 2.5
    assert result.failure is not None and result.failure.category == "timeout"
    assert result.reply is None


@pytest.mark.parametrize("fault", ["rate_malformed", "rate_truncated"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_malformed_and_truncated_bodies_are_malformed_responses(
    server: SimJudgeServer, fault: str, provider: str
) -> None:
    server.set_faults(**{fault: 1.0})
    [result] = _send(_spec(server, provider=provider, max_retries=0), [_request()])
    assert result.reply is None and result.failure is not None
    assert result.failure.category == "malformed_response"
    assert server.request_log()[0]["fault"] == fault.removeprefix("rate_")


def test_transport_failure_is_classified() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = JudgeSpec(name="j", base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0)
    [result] = _send(spec, [_request()])
    assert result.failure is not None and result.failure.category == "transport"


def test_concurrency_is_bounded(server: SimJudgeServer) -> None:
    started = time.perf_counter()
    results = _send(_spec(server, model="slow", max_concurrency=2), [_request(i) for i in range(6)])
    elapsed = time.perf_counter() - started
    assert all(r.reply is not None for r in results)
    assert elapsed >= 0.3  # 6 calls of 100 ms, two at a time


def test_requests_per_minute_spaces_requests(server: SimJudgeServer) -> None:
    results = _send(_spec(server, requests_per_minute=600), [_request(i) for i in range(5)])
    assert all(r.reply is not None for r in results)
    times = sorted(dt.datetime.fromisoformat(e["time"]) for e in server.request_log())
    assert (times[-1] - times[0]).total_seconds() >= 0.35  # 4 gaps of 0.1 s


def test_refusals_are_classified_from_reply_bodies() -> None:
    spec = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m")
    openai = OpenAIProvider(spec, None, None)  # type: ignore[arg-type]
    filtered = {"choices": [{"message": {"content": None}, "finish_reason": "content_filter"}]}
    explicit = {
        "choices": [{"message": {"content": None, "refusal": "no"}, "finish_reason": "stop"}]
    }
    for body in (filtered, explicit):
        out = openai.parse(body, 1.0)
        assert isinstance(out, CallFailure) and out.category == "refused"
    anthropic = AnthropicProvider(spec, None, None)  # type: ignore[arg-type]
    out = anthropic.parse({"content": [], "stop_reason": "refusal"}, 1.0)
    assert isinstance(out, CallFailure) and out.category == "refused"
    out = anthropic.parse({"content": [{"type": "tool_use"}], "stop_reason": "end_turn"}, 1.0)
    assert isinstance(out, CallFailure) and out.category == "malformed_response"


def test_anthropic_body_splits_system_and_drops_seed() -> None:
    spec = JudgeSpec(name="j", provider="anthropic", base_url="http://x/v1", model="m", top_p=0.5)
    body = AnthropicProvider(spec, None, None).body(_request(seed=2))  # type: ignore[arg-type]
    assert body["system"] == PROMPT.messages[0]["content"]
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "seed" not in body and body["top_p"] == 0.5 and body["max_tokens"] == 1024
    config = ReasoningConfig(name="hi", extra={"reasoning_effort": "high"})
    openai_body = OpenAIProvider(
        JudgeSpec(name="j", base_url="http://x/v1", model="m", extra={"reasoning_effort": "low"}),
        None,  # type: ignore[arg-type]
        None,
    ).body(CallRequest(call_key="k", messages=PROMPT.messages, seed=7, config=config))
    assert openai_body["seed"] == 7 and openai_body["reasoning_effort"] == "high"
    assert openai_body["messages"] == list(PROMPT.messages)


def test_retry_policy_numbers() -> None:
    policy = RetryPolicy(max_retries=2, base_s=0.5, cap_s=4)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (5, 4.0), (9, 4.0)]:
        waits = [policy.delay(attempt, None) for _ in range(200)]
        assert min(waits) >= ceiling / 2 and max(waits) <= ceiling
    assert policy.delay(1, 7.0) >= 7.0
    failure = CallFailure("server_error", "x", 1.0)
    assert policy.should_retry(failure, 1) and policy.should_retry(failure, 2)
    assert not policy.should_retry(failure, 3)
    assert not policy.should_retry(CallFailure("client_error", "x", 1.0), 1)
    for never in ("auth", "quota", "bad_request"):
        assert not policy.should_retry(CallFailure(never, "x", 1.0), 1)
    assert policy.should_retry(CallFailure("overloaded", "x", 1.0), 1)
    assert not policy.should_retry(CallFailure("refused", "x", 1.0), 1)


def test_public_surface_is_pinned() -> None:
    assert set(PROVIDERS) == {"openai", "anthropic", "openai-responses"}
    # Pacing (retries, rate limit, breaker) has its own module: the two keep the surface.
    assert set(client_module.__all__) | {
        "BREAKER_TRIP_AFTER",
        "BreakerTrip",
        "RateLimiter",
        "RetryPolicy",
    } == {
        "BREAKER_TRIP_AFTER",
        "BreakerTrip",
        "CallRequest",
        "CallResult",
        "JudgeClient",
        "RateLimiter",
        "RetryPolicy",
        "aresolve_api_key",
        "resolve_api_key",
    }
    assert {"BREAKER_TRIP_AFTER", "BreakerTrip", "RateLimiter", "RetryPolicy"} <= set(
        pacing.__all__
    )
