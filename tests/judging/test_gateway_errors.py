"""Error replies of a LiteLLM proxy in front of the judges, replayed over loopback.

The bodies and headers are LiteLLM 1.108.7's, captured with `bench/gateway.py` against the
simulated judge: LiteLLM answers in the dialect the client spoke (an OpenAI error body on
`/v1/chat/completions`, an Anthropic one on `/v1/messages`), quotes the upstream error in its
own message, and may change the status (an Anthropic 529 becomes a 500).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from scripted_judge import Answer, ScriptedJudge

from schemas.judge import JudgeSpec, ReasoningConfig
from tasks.judging.client import CallResult, JudgeClient
from tasks.judging.failures import error_message
from tasks.judging.pacing import RetryPolicy
from tasks.judging.providers import CallRequest
from tasks.prompts.templates import render

KEY = "sk-judgeline-gateway-5e6f7a8b"
PROMPT = render("arena-hard-v1", question="What is 2+2?", left="4", right="5")


def _openai_route(message: str, kind: str, code: str) -> dict[str, Any]:
    """LiteLLM's error body on `/v1/chat/completions`."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _messages_route(kind: str, message: str) -> dict[str, Any]:
    """LiteLLM's error body on `/v1/messages` (Anthropic's shape, no request id)."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def _upstream(kind: str, message: str) -> str:
    return json.dumps(
        {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1f2e"},
        separators=(",", ":"),
    )


GROUP = "\n\nLiteLLM: model group '{}' failed with the error above. No fallback was attempted."
CASES: dict[str, tuple[str, Answer, str]] = {
    "anthropic-529-as-500": (
        "anthropic",
        Answer(500, _messages_route("api_error", "litellm.InternalServerError: AnthropicError - "
               + _upstream("overloaded_error", "Overloaded") + GROUP.format("claude-exact"))),
        "overloaded",
    ),
    "openai-429": (
        "openai",
        Answer(429, _openai_route("litellm.RateLimitError: RateLimitError: OpenAIException - "
               "Rate limit reached (simulated)" + GROUP.format("exact"), "throttling_error", "429"),
               {"llm_provider-retry-after": "1", "llm_provider-retry-after-ms": "1000"}),
        "rate_limited",
    ),
    "openai-quota-429": (
        "openai",
        Answer(429, _openai_route("litellm.RateLimitError: RateLimitError: OpenAIException - You "
               "exceeded your current quota, please check your plan and billing details."
               + GROUP.format("exact"), "throttling_error", "429")),
        "quota",
    ),
    "anthropic-credit-400": (
        "anthropic",
        Answer(400, _messages_route("invalid_request_error", "litellm.BadRequestError: "
               "AnthropicException - " + _upstream("invalid_request_error", "Your credit balance "
               "is too low to access the Anthropic API. Please go to Plans & Billing to upgrade "
               "or purchase credits.") + GROUP.format("claude-exact"))),
        "quota",
    ),
    "unknown-model": (
        "openai",
        Answer(400, _openai_route("/chat/completions: Invalid model name passed in model=nope. "
               "Call `/v1/models` to view available models for your key.",
               "invalid_request_error", "400")),
        "bad_request",
    ),
    "seed-refused": (
        "openai",
        Answer(400, _openai_route("litellm.UnsupportedParamsError: anthropic does not support "
               "parameters: ['seed'], for model=exact. To drop these, set `litellm.drop_params="
               "True` or for proxy:\n\n`litellm_settings:\n drop_params: true`\n. \n If you "
               "want to use these params dynamically send allowed_openai_params=['seed'] in your "
               "request." + GROUP.format("claude-exact"), "invalid_request_error", "400")),
        "bad_request",
    ),
    "wrong-key-no-database": (
        "openai",
        Answer(400, _openai_route("No connected db.", "no_db_connection", "400")),
        "auth",
    ),
    "anthropic-502": (
        "anthropic",
        Answer(502, _messages_route("api_error", "litellm.BadGatewayError: AnthropicException "
               "BadGatewayError - " + _upstream("api_error", "simulated server error 502")
               + GROUP.format("claude-exact"))),
        "server_error",
    ),
}  # fmt: skip


def _send(spec: JudgeSpec) -> CallResult:
    request = CallRequest(
        call_key="key-gw", messages=PROMPT.messages, seed=0, config=ReasoningConfig(name="d")
    )

    async def go() -> CallResult:
        retry = RetryPolicy(max_retries=0, base_s=0.01)
        async with JudgeClient(spec, KEY, run_id="run-gw", retry=retry) as client:
            return await client.send(request)

    return asyncio.run(go())


@pytest.mark.parametrize("case", list(CASES))
def test_a_gateway_error_keeps_its_category_and_words(judge: ScriptedJudge, case: str) -> None:
    provider, answer, category = CASES[case]
    judge.queue.append(answer)
    spec = JudgeSpec.model_validate(
        {"name": "gw", "base_url": judge.base_url, "model": "exact", "provider": provider,
         "profile": "anthropic" if provider == "anthropic" else "openai_compatible",
         "max_retries": 0}
    )  # fmt: skip
    result = _send(spec)
    assert result.failure is not None
    assert (result.failure.category, result.failure.http_status) == (category, answer.status)
    assert error_message(json.dumps(answer.body)) in result.failure.detail
    if "llm_provider-retry-after" in answer.headers:
        assert result.failure.retry_after == 1.0
