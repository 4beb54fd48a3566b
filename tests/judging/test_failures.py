"""Failures that say why, over loopback: every category from the providers' own error bodies,
every Retry-After form, quota never retried, the breaker, truncated replies, whole messages."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import email.utils
import json
import logging
from typing import Any

import httpx
import pytest
from scripted_judge import Answer, ScriptedJudge, anthropic_reply, openai_reply

from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from tasks.judging.client import CallResult, JudgeClient
from tasks.judging.failures import DETAIL_LIMIT_BYTES, error_message, retry_after
from tasks.judging.pacing import BREAKER_TRIP_AFTER, RetryPolicy
from tasks.judging.providers import CallRequest
from tasks.prompts.parsing import parse_reply
from tasks.prompts.templates import render
from tasks.runs.health import stop_line

KEY = "sk-judgeline-failures-1c2d3e4f"
PROMPT = render("arena-hard-v1", question="What is 2+2?", left="4", right="5")


def _spec(judge: ScriptedJudge, **kw: Any) -> JudgeSpec:
    base: dict[str, Any] = {"name": "j", "base_url": judge.base_url, "model": "m"}
    base.update(kw)
    return JudgeSpec.model_validate(base)


def _request(i: int = 0, config: str = "d") -> CallRequest:
    return CallRequest(
        call_key=f"key-{config}-{i}",
        messages=PROMPT.messages,
        seed=i,
        config=ReasoningConfig(name=config, extra={"cfg": config}),
    )


def _send(spec: JudgeSpec, requests: list[CallRequest]) -> tuple[list[CallResult], JudgeClient]:
    """Send through one client (retries as the spec says, 10 ms apart unless told longer)."""
    retry = RetryPolicy(max_retries=spec.max_retries, base_s=0.01)

    async def go() -> tuple[list[CallResult], JudgeClient]:
        async with JudgeClient(spec, KEY, run_id="run-f", retry=retry) as client:
            return list(await asyncio.gather(*(client.send(r) for r in requests))), client

    return asyncio.run(go())


def _error(kind: str, message: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body (also LiteLLM's)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _anthropic_error(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message, **extra},
        "request_id": "req_011CTest",
    }


QUOTA_OPENAI = "You exceeded your current quota, please check your plan and billing details."
CREDIT_ANTHROPIC = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
CASES: dict[str, tuple[str, Answer, str]] = {
    "openai-401": (
        "openai",
        Answer(401, _error("invalid_request_error", "Incorrect API key provided: sk-wr***ng.",
                           "invalid_api_key")),
        "auth",
    ),
    "anthropic-401": (
        "anthropic",
        Answer(401, _anthropic_error("authentication_error", "invalid x-api-key")),
        "auth",
    ),
    "anthropic-403": (
        "anthropic",
        Answer(403, _anthropic_error("permission_error", "Your API key does not have permission")),
        "auth",
    ),
    "openai-insufficient-quota": (
        "openai",
        Answer(429, _error("insufficient_quota", QUOTA_OPENAI, "insufficient_quota"),
               {"retry-after": "1"}),
        "quota",
    ),
    "anthropic-credit": (
        "anthropic",
        Answer(400, _anthropic_error("invalid_request_error", CREDIT_ANTHROPIC)),
        "quota",
    ),
    "anthropic-402": (
        "anthropic",
        Answer(402, _anthropic_error("billing_error", "Billing issue with your account")),
        "quota",
    ),
    "anthropic-spend-limit": (
        "anthropic",
        Answer(429, _anthropic_error(
            "rate_limit_error", "Monthly spend limit reached",
            details={"error_code": "enforced_spend_limit_reached"},
        )),
        "quota",
    ),
    "litellm-budget": (
        "openai",
        Answer(400, _error("budget_exceeded", "Budget has been exceeded! Current cost: 10.2, "
                           "Max budget: 10.0", "400")),
        "quota",
    ),
    "openai-400-param": (
        "openai",
        Answer(400, _error("invalid_request_error", "Unsupported value: 'temperature' does not "
                           "support 0.0 with this model. Only the default (1) value is supported.",
                           "unsupported_value")),
        "bad_request",
    ),
    "anthropic-404-model": (
        "anthropic",
        Answer(404, _anthropic_error("not_found_error", "model: claude-nope")),
        "bad_request",
    ),
    "gateway-422": ("openai", Answer(422, {"detail": "Unprocessable Entity"}), "bad_request"),
    "openai-429": (
        "openai",
        Answer(429, _error("requests", "Rate limit reached for requests", "rate_limit_exceeded")),
        "rate_limited",
    ),
    "anthropic-529": (
        "anthropic",
        Answer(529, _anthropic_error("overloaded_error", "Overloaded")),
        "overloaded",
    ),
    "openai-500": ("openai", Answer(500, _error("server_error", "The server had an error")),
                   "server_error"),
    "gateway-408": ("openai", Answer(408, "Request Timeout"), "timeout"),
    "openai-refusal": (
        "openai",
        Answer(400, _error("invalid_request_error", "Your request was rejected by our safety "
                           "system", "content_policy_violation")),
        "refused",
    ),
    "not-json": ("openai", Answer(200, "<html>proxy says hi</html>"), "malformed_response"),
    # Google's OpenAI-compatible endpoint (Gemini): its error object in a one-item list, a
    # wrong key as 400 INVALID_ARGUMENT with the reason API_KEY_INVALID.
    "gemini-key": (
        "openai",
        Answer(400, [{"error": {"code": 400, "message": "API key not valid. Please pass a valid "
                                "API key.", "status": "INVALID_ARGUMENT",
                     "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                  "reason": "API_KEY_INVALID"}]}}]),
        "auth",
    ),
    "gemini-429": (
        "openai",
        Answer(429, [{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check "
                                "quota).", "status": "RESOURCE_EXHAUSTED"}}]),
        "rate_limited",
    ),
    "gemini-400": (
        "openai",
        Answer(400, [{"error": {"code": 400, "message": "Invalid value at 'reasoning_effort'",
                                "status": "INVALID_ARGUMENT"}}]),
        "bad_request",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_every_category_from_the_providers_own_bodies(judge: ScriptedJudge, case: str) -> None:
    provider, answer, category = CASES[case]
    judge.queue.append(answer)
    [result], _ = _send(_spec(judge, provider=provider, max_retries=0), [_request()])
    assert result.reply is None and result.failure is not None
    assert result.failure.category == category
    assert result.failure.http_status == answer.status
    [attempt] = result.attempts
    assert attempt.error_category == category and attempt.http_status == answer.status
    if isinstance(answer.body, dict | list):  # the provider's message, in its own words
        message = error_message(json.dumps(answer.body))
        assert message in (attempt.detail or "") and not message.startswith(("{", "["))
    if provider == "anthropic" and answer.status != 200:
        assert len(judge.log) == 1


def test_timeout_and_transport_over_loopback(judge: ScriptedJudge) -> None:
    judge.delay_s = 1.0
    [result], _ = _send(_spec(judge, timeout_s=0.2, max_retries=0), [_request()])
    assert result.failure is not None and result.failure.category == "timeout"
    judge.delay_s = 0.0
    spec = JudgeSpec(name="j", base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    [result], _ = _send(spec, [_request()])
    assert result.failure is not None and result.failure.category == "transport"


def test_never_produced_client_error_still_reads() -> None:
    from schemas.calls import AttemptRecord

    old = AttemptRecord(
        call_key="k", run_id="r", attempt=1, ok=False, error_category="client_error",
        http_status=400, detail="HTTP 400: old", latency_ms=1.0, started_at=dt.datetime.now(dt.UTC),
    )  # fmt: skip
    assert AttemptRecord.model_validate(old.model_dump()).error_category == "client_error"
    produced = {category for _, _, category in CASES.values()}
    assert "client_error" not in produced


def _http_date(seconds: float) -> str:
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return email.utils.format_datetime(when, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "floor_s"),
    [
        ({"retry-after": "1"}, 1.0),
        ({"retry-after-ms": "1200"}, 1.2),
        ({"llm_provider-retry-after": "1"}, 1.0),
        ({"retry-after": "__date__"}, 1.0),
        ({"retry-after": "0", "retry-after-ms": "1100"}, 1.1),
    ],
    ids=["seconds", "ms", "litellm", "http-date", "longest-wins"],
)
def test_every_retry_after_form_is_a_floor(
    judge: ScriptedJudge, headers: dict[str, str], floor_s: float
) -> None:
    if headers.get("retry-after") == "__date__":
        # HTTP dates have whole seconds: two seconds ahead is at least one from now.
        # An HTTP date has whole seconds: 3 s ahead is at least 2 s away when it is read.
        headers = {"retry-after": _http_date(3.0)}
    judge.queue.append(Answer(429, _error("requests", "Rate limit reached"), headers))
    [result], _ = _send(_spec(judge), [_request()])
    assert result.reply is not None
    assert [a.error_category for a in result.attempts] == ["rate_limited", None]
    first, second = judge.log
    assert second["time"] - first["time"] >= floor_s


def test_retry_after_parsing() -> None:
    now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    date = email.utils.format_datetime(now + dt.timedelta(seconds=30), usegmt=True)
    cases = {
        (("retry-after", "7"),): 7.0,
        (("retry-after", "2.5"),): 2.5,
        (("retry-after-ms", "250"),): 0.25,
        (("retry-after", date),): 30.0,
        (("llm_provider-retry-after", "4"),): 4.0,
        (("llm_provider-retry-after-ms", "4000"), ("retry-after", "1")): 4.0,
        (("retry-after", "soon"),): None,
        (("retry-after", "-3"),): 0.0,
        (): None,
    }
    for pairs, expected in cases.items():
        assert retry_after(httpx.Headers(list(pairs)), now) == expected, pairs


def test_quota_is_not_retried_and_does_not_cut_concurrency(judge: ScriptedJudge) -> None:
    spec = _spec(judge, max_concurrency=4)
    judge.queue.append(
        Answer(429, _error("insufficient_quota", QUOTA_OPENAI, "insufficient_quota"),
               {"retry-after": "1"})
    )  # fmt: skip

    async def go() -> tuple[CallResult, int]:
        async with JudgeClient(spec, KEY, retry=RetryPolicy(base_s=0.01)) as client:
            lead = await client.send(_request(0))
            judge.delay_s, judge.max_in_flight = 0.2, 0
            await asyncio.gather(*(client.send(_request(i)) for i in range(1, 9)))
            judge.delay_s = 0.0
            return lead, judge.max_in_flight

    quota, in_flight = asyncio.run(go())
    assert quota.failure is not None and quota.failure.category == "quota"
    assert len(quota.attempts) == 1  # not retried, though it said retry-after
    assert in_flight == 4  # all four slots still in use

    # A 529 does cut: halved to two, regrowing by successes, the burst never fills four.
    judge.reset()
    judge.queue.append(Answer(529, _anthropic_error("overloaded_error", "Overloaded")))
    overloaded, in_flight = asyncio.run(go())
    assert overloaded.reply is not None
    assert [a.error_category for a in overloaded.attempts] == ["overloaded", None]
    assert in_flight < 4


def test_breaker_stops_a_wrong_key_after_a_handful_of_calls(judge: ScriptedJudge) -> None:
    message = "Incorrect API key provided: sk-wr***ng. You can find your API key at ..."
    judge.fallback = lambda body: Answer(
        401, _error("invalid_request_error", message, "invalid_api_key")
    )
    spec = _spec(judge, max_concurrency=4)
    results, client = _send(spec, [_request(i) for i in range(200)])
    sent = len(judge.log)
    assert BREAKER_TRIP_AFTER <= sent <= BREAKER_TRIP_AFTER + spec.max_concurrency
    failed = [r for r in results if r.failure is not None]
    held = [r for r in results if r.held]
    assert len(failed) == sent and len(held) == 200 - sent
    assert all(r.reply is None and not r.attempts for r in held)  # pending: nothing recorded
    [trip] = client.tripped
    assert (trip.judge, trip.config, trip.category, trip.http_status) == ("j", "d", "auth", 401)
    assert trip.failures + trip.in_flight_failed == sent and trip.held == len(held)
    assert message in trip.message and KEY not in trip.message


def test_breaker_stop_says_one_count_and_the_requests_in_flight(
    judge: ScriptedJudge, caplog: pytest.LogCaptureFixture
) -> None:
    """The first 16 requests leave together (and one more after each of the first two
    401s); the breaker trips at the third 401 and the others answer afterwards. The log line
    at the trip and the run's reason agree: 3 in a row (as the README says), and the 13-15
    more requests that were in flight."""
    caplog.set_level(logging.WARNING, logger="tasks.judging.client")
    judge.delay_s = 0.2
    judge.fallback = lambda body: Answer(401, _error("invalid_request_error", "bad key", None))
    results, client = _send(_spec(judge, max_concurrency=16), [_request(i) for i in range(64)])
    sent = len(judge.log)
    assert 16 <= sent <= 18
    [trip] = client.tripped
    assert (trip.failures, trip.in_flight, trip.in_flight_failed) == (3, sent - 3, sent - 3)
    [logged] = [r.getMessage() for r in caplog.records if "stopped after" in r.getMessage()]
    line = stop_line("r", dataclasses.asdict(trip), trip.message, trip.held)
    for text in (logged, line):
        assert f"stopped after {BREAKER_TRIP_AFTER} auth failures in a row" in text, text
    assert f"{sent - 3} more requests were in flight" in logged
    assert f"{sent - 3} requests already in flight then failed too" in line
    assert f"{64 - sent} calls not sent" in line
    assert sum(r.failure is not None for r in results) == sent


def test_a_timeout_is_retried_once_and_counted(judge: ScriptedJudge) -> None:
    """A judge slower than the timeout: a provider may bill a request the client gave up
    on, so each call is tried twice, not 1 + max_retries times, and every abandoned request
    is counted."""
    judge.delay_s = 1.0
    spec = _spec(judge, timeout_s=0.2, max_retries=4)
    results, client = _send(spec, [_request(i) for i in range(8)])
    assert len(judge.log) == 16
    for r in results:
        assert r.failure is not None and r.failure.category == "timeout"
        assert [a.error_category for a in r.attempts] == ["timeout", "timeout"]
    assert client.timed_out == 16


def test_the_default_timeout_grows_with_the_output_budget() -> None:
    base = {"name": "j", "base_url": "https://api.openai.com/v1", "model": "o4-mini"}
    judge = JudgeSpec.model_validate(
        base | {"reasoning": True, "configs": [
            {"name": "low", "reasoning_effort": "low"},
            {"name": "high", "reasoning_effort": "high", "max_tokens": 16000},
            {"name": "open", "max_tokens": None},
        ]}
    )  # fmt: skip
    low, high, unbounded = judge.configs
    # 60 s plus the Anthropic SDK's own expectation for a non-streaming reply (an hour per
    # 128,000 output tokens), never under 120 s; no limit: the SDKs' 10 minutes.
    assert judge.request_timeout(low) == pytest.approx(60 + 3600 * 4096 / 128_000)
    assert judge.request_timeout(high) == pytest.approx(60 + 3600 * 16_000 / 128_000)
    assert judge.request_timeout(unbounded) == 600
    plain = JudgeSpec.model_validate(base | {"model": "gpt-4o-mini"})
    assert plain.request_timeout() == 120  # max_tokens 1024: the floor
    fixed = JudgeSpec.model_validate(base | {"timeout_s": 30, "max_tokens": 16000})
    assert fixed.request_timeout() == 30


def test_breaker_is_per_config_and_bad_request_counts_only_before_a_success(
    judge: ScriptedJudge,
) -> None:
    def by_config(body: dict[str, Any]) -> Answer:
        if body.get("cfg") == "bad":
            return Answer(400, _error("invalid_request_error", "Unrecognized request argument "
                                      "supplied: cfg", None))  # fmt: skip
        return Answer(200, openai_reply())

    judge.fallback = by_config
    requests = [_request(i, c) for i in range(40) for c in ("bad", "good")]
    results, client = _send(_spec(judge, max_concurrency=2), requests)
    good = [r for r in results if r.call_key.startswith("key-good")]
    assert all(r.reply is not None for r in good)
    [trip] = client.tripped
    assert (trip.config, trip.category) == ("bad", "bad_request")
    assert sum(e["body"]["cfg"] == "bad" for e in judge.log) <= BREAKER_TRIP_AFTER + 2

    # After a success, 400s are the prompts' own: they never stop the config.
    judge.reset()
    judge.queue.append(Answer(200, openai_reply()))
    judge.fallback = lambda body: Answer(400, _error("invalid_request_error", "too long", None))
    results, client = _send(_spec(judge, max_concurrency=1), [_request(i) for i in range(8)])
    assert client.tripped == [] and len(judge.log) == 8


@pytest.mark.parametrize(
    ("provider", "body", "finish"),
    [
        ("openai", openai_reply(None, "length"), "length"),
        ("openai", openai_reply("Let me weigh both answers. [[A", "length"), "length"),
        (
            "anthropic",
            anthropic_reply(
                [{"type": "thinking", "thinking": "hmm", "signature": "s"}], "max_tokens"
            ),
            "max_tokens",
        ),
        (
            "anthropic",
            anthropic_reply(
                [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Verdict: [[A>B]] because"},
                ],
                "max_tokens",
            ),
            "max_tokens",
        ),
    ],  # fmt: skip
    ids=["openai-empty", "openai-cut", "anthropic-thinking-only", "anthropic-cut"],
)
def test_a_truncated_reply_is_a_paid_reply_sent_once(
    judge: ScriptedJudge, provider: str, body: dict[str, Any], finish: str
) -> None:
    judge.fallback = lambda _: Answer(200, body)
    [result], _ = _send(_spec(judge, provider=provider, max_retries=4), [_request()])
    assert len(judge.log) == 1  # not re-sent
    assert result.failure is None and result.reply is not None
    assert result.reply.finish_reason == finish and result.reply.truncated
    [attempt] = result.attempts
    assert attempt.ok
    parsed = parse_reply("arena-hard-v1", result.reply.raw_reply, result.reply.finish_reason)
    assert parsed.label == "Invalid" and parsed.note and parsed.note.startswith("truncated")


def test_the_providers_message_is_kept_whole_and_bounded(judge: ScriptedJudge) -> None:
    whole = "Invalid 'messages[0].content': string too long. " + "x" * 1500 + " (end)"
    judge.queue.append(Answer(400, _error("invalid_request_error", whole, "string_above_max"),
                              {"x-request-id": "req_abc123"}))  # fmt: skip
    [result], _ = _send(_spec(judge, max_retries=0), [_request()])
    detail = result.attempts[0].detail or ""
    assert detail == f"HTTP 400 (request req_abc123): {whole}"

    huge = f"key {KEY} rejected; " + "é" * 6000  # two bytes a character
    judge.queue.append(Answer(401, _anthropic_error("authentication_error", huge)))
    [result], _ = _send(_spec(judge, provider="anthropic", max_retries=0), [_request()])
    detail = result.attempts[0].detail or ""
    assert len(detail.encode()) <= DETAIL_LIMIT_BYTES and len(detail.encode()) > 4000
    assert KEY not in detail and "key *** rejected" in detail

    judge.queue.append(Answer(502, "<html><body>Bad gateway</body></html>"))
    [result], _ = _send(_spec(judge, max_retries=0), [_request()])
    assert result.attempts[0].detail == "HTTP 502: <html><body>Bad gateway</body></html>"


KEYS = ["sk-proj-Ab3xQ9_kLmN0pQrStUvWxYz12345", "wJalrXUtnFEMI/K7MDENG/bPxRfi+CYEXAMPLEKEY=="]
"""An OpenAI-style key and an AWS-style one (`/`, `+` and `=` change when URL-encoded)."""


def _encoded(key: str) -> dict[str, str]:
    """Where a key turns up in a provider's or a gateway's error text, by encoding."""
    import base64
    from urllib.parse import quote, quote_plus

    forms = {
        "verbatim": f"Incorrect API key provided: {key}.",
        "url": f"GET https://gw.example/v1/models?key={quote(key, safe='')} failed",
        "url lowercase": "key=" + quote(key, safe="").replace("%2F", "%2f").replace("%2B", "%2b"),
        "url plus": f"body api_key={quote_plus(key)}&model=m",
        "json": json.dumps({"error": {"message": f"bad key {key}"}}).replace("/", "\\/"),
    }
    for user in ("", "u", "me", "api"):  # each alignment of the key in the base64 text
        basic = base64.b64encode(f"{user}:{key}".encode()).decode()
        forms[f"basic {user!r}"] = f"upstream said: Authorization: Basic {basic} is invalid"
        urlsafe = base64.urlsafe_b64encode(f"{user}:{key}".encode()).decode()
        forms[f"urlsafe {user!r}"] = f"token={urlsafe}; retry"
    return forms


@pytest.mark.parametrize("key", KEYS, ids=["openai", "aws"])
def test_scrub_masks_a_key_in_every_encoding_an_error_text_holds(key: str) -> None:
    import base64

    from tasks.judging.failures import scrub

    for name, text in _encoded(key).items():
        masked = scrub(text, key)
        assert "***" in masked, name
        assert key not in masked and key[6:-6] not in masked, (name, masked)
        for token in masked.replace("=", " ").split():  # no base64 word still holds it
            for altchars in (b"+/", b"-_"):
                try:
                    decoded = base64.b64decode(token + "=" * (-len(token) % 4), altchars)
                except ValueError:
                    continue
                assert key[4:-4].encode() not in decoded, (name, masked)
    plain = "model gpt-4o-mini: HTTP 400 (context_length_exceeded) dGhpcyBpcyBub3QgYSBrZXk="
    assert scrub(plain, KEYS[0]) == plain  # nothing else is masked
