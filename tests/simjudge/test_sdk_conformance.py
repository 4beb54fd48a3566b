"""The simulated judge as the official `openai` and `anthropic` SDKs see it.

Clients written by the API vendors parse its replies into their typed objects, read its
request ids and raise the exception a real API's fault would raise. Retries are off so
every fault surfaces.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from simjudge.persona import Faults, Persona
from simjudge.server import SimJudgeServer
from tasks.prompts.templates import render

KEY = "sk-sdk-conformance-5e1f"
PERSONAS = [
    Persona(name="strong", skill=0.9),
    Persona(name="o4-mini", skill=0.9),
    Persona(name="gpt-5-mini", skill=0.9),
    Persona(name="always-429", faults=Faults(rate_429=1.0, retry_after_s=2)),
    Persona(name="always-quota", faults=Faults(rate_quota=1.0)),
    Persona(name="always-5xx", faults=Faults(rate_5xx=1.0)),
    Persona(name="always-529", faults=Faults(rate_529=1.0)),
]
PROMPT = render("arena-hard-v1", question="What is 6 x 7?", left="42", right="It is 41.")
MESSAGES: list[Any] = list(PROMPT.messages)
SYSTEM = str(PROMPT.messages[0]["content"])
USER: list[Any] = [PROMPT.messages[1]]


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(PERSONAS, api_key=KEY, require_anthropic_version=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def oai(server: SimJudgeServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def claude(server: SimJudgeServer) -> Iterator[anthropic.Anthropic]:
    root = server.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key=KEY, max_retries=0) as client:
        yield client


# --- OpenAI --------------------------------------------------------------------------------


def test_openai_completion_parses_with_request_id_and_rate_limit_headers(
    oai: openai.OpenAI,
) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model="strong", messages=MESSAGES, temperature=0.0, max_tokens=512, seed=1
    )
    completion = raw.parse()
    assert isinstance(completion, openai.types.chat.ChatCompletion)
    assert completion.choices[0].finish_reason == "stop"
    assert "[[" in (completion.choices[0].message.content or "")
    assert completion.usage is not None and completion.usage.total_tokens > 0
    assert completion._request_id is not None and completion._request_id.startswith("req_")
    assert raw.headers["x-request-id"] == completion._request_id
    for name in ("requests", "tokens"):
        assert int(raw.headers[f"x-ratelimit-limit-{name}"]) > 0
        assert int(raw.headers[f"x-ratelimit-remaining-{name}"]) >= 0
        assert raw.headers[f"x-ratelimit-reset-{name}"].endswith("s")


def test_openai_reasoning_model_profile(oai: openai.OpenAI) -> None:
    for model in ("o4-mini", "gpt-5-mini"):
        with pytest.raises(openai.BadRequestError) as temp:
            oai.chat.completions.create(model=model, messages=MESSAGES, temperature=0.2)
        assert temp.value.param == "temperature" and temp.value.code == "unsupported_value"
        assert temp.value.request_id is not None
        with pytest.raises(openai.BadRequestError) as limit:
            oai.chat.completions.create(model=model, messages=MESSAGES, max_tokens=256)
        assert limit.value.param == "max_tokens" and limit.value.code == "unsupported_parameter"
        assert "max_completion_tokens" in limit.value.message
    for effort in ("minimal", "low", "medium", "high"):
        done = oai.chat.completions.create(
            model="gpt-5-mini", messages=MESSAGES, max_completion_tokens=4096,
            reasoning_effort=effort,  # type: ignore[arg-type]  # str, not the SDK's Literal
        )  # fmt: skip
        assert done.choices[0].finish_reason == "stop"
        assert done.usage is not None and done.usage.completion_tokens_details is not None
        assert done.usage.completion_tokens_details.reasoning_tokens is not None
    # Each family takes its own efforts (tests/simjudge/test_model_profiles.py).
    for model, effort in (("o4-mini", "extreme"), ("o4-mini", "minimal"), ("gpt-5-mini", "none")):
        with pytest.raises(openai.BadRequestError) as effort_error:
            oai.chat.completions.create(
                model=model, messages=MESSAGES, extra_body={"reasoning_effort": effort}
            )
        assert effort_error.value.param == "reasoning_effort"
        assert effort_error.value.code == "unsupported_value"


def test_openai_reply_cut_at_the_limit(oai: openai.OpenAI) -> None:
    cut = oai.chat.completions.create(model="strong", messages=MESSAGES, max_tokens=3)
    assert cut.choices[0].finish_reason == "length"
    assert cut.usage is not None and cut.usage.completion_tokens == 3
    assert len(cut.choices[0].message.content or "") <= 12
    # A reasoning model that spends its limit on reasoning replies with nothing.
    spent = oai.chat.completions.create(
        model="o4-mini", messages=MESSAGES, max_completion_tokens=100, reasoning_effort="high"
    )
    assert spent.choices[0].finish_reason == "length"
    assert spent.choices[0].message.content == ""


def test_openai_faults_raise_the_sdk_exceptions(server: SimJudgeServer, oai: openai.OpenAI) -> None:
    with pytest.raises(openai.RateLimitError) as limited:
        oai.chat.completions.create(model="always-429", messages=MESSAGES)
    assert limited.value.code == "rate_limit_exceeded"
    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.response.headers["retry-after-ms"] == "2000"
    assert limited.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert limited.value.request_id is not None
    with pytest.raises(openai.RateLimitError) as quota:
        oai.chat.completions.create(model="always-quota", messages=MESSAGES)
    assert quota.value.code == "insufficient_quota" and quota.value.type == "insufficient_quota"
    assert "retry-after" not in quota.value.response.headers
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(model="always-5xx", messages=MESSAGES)
    with pytest.raises(openai.InternalServerError) as overloaded:
        oai.chat.completions.create(model="always-529", messages=MESSAGES)
    assert overloaded.value.status_code == 503
    with pytest.raises(openai.NotFoundError) as missing:
        oai.chat.completions.create(model="gpt-9", messages=MESSAGES)
    assert missing.value.code == "model_not_found"
    with (
        openai.OpenAI(base_url=server.base_url, api_key="sk-wrong", max_retries=0) as wrong,
        pytest.raises(openai.AuthenticationError) as denied,
    ):
        wrong.chat.completions.create(model="strong", messages=MESSAGES)
    assert denied.value.code == "invalid_api_key" and "sk-wrong" not in denied.value.message


def test_azure_openai_clients(server: SimJudgeServer) -> None:
    root = server.base_url.removesuffix("/v1")
    with openai.AzureOpenAI(
        azure_endpoint=root, api_key=KEY, api_version="2024-10-21", max_retries=0
    ) as azure:
        done = azure.chat.completions.with_raw_response.create(model="strong", messages=MESSAGES)
        assert done.parse().choices[0].finish_reason == "stop"
        assert done.headers["apim-request-id"] == done.headers["x-request-id"]
        with pytest.raises(openai.NotFoundError):
            azure.chat.completions.create(model="no-such-deployment", messages=MESSAGES)
    with openai.AzureOpenAI(
        azure_endpoint=root, api_key="wrong", api_version="2024-10-21", max_retries=0
    ) as wrong, pytest.raises(openai.AuthenticationError):  # fmt: skip
        wrong.chat.completions.create(model="strong", messages=MESSAGES)
    with openai.OpenAI(base_url=f"{root}/openai/v1", api_key=KEY, max_retries=0) as v1:
        assert v1.chat.completions.create(model="strong", messages=MESSAGES).choices
    missing_version = httpx.post(
        f"{root}/openai/deployments/strong/chat/completions",
        json={"messages": MESSAGES},
        headers={"api-key": KEY},
    )
    assert missing_version.status_code == 404
    assert missing_version.json()["error"]["message"] == "Resource not found"


# --- Anthropic -----------------------------------------------------------------------------


def test_anthropic_message_parses_with_request_id_and_rate_limit_headers(
    claude: anthropic.Anthropic,
) -> None:
    raw = claude.messages.with_raw_response.create(
        model="strong", max_tokens=512, system=SYSTEM, messages=USER
    )
    message = raw.parse()
    assert isinstance(message, anthropic.types.Message)
    assert message.stop_reason == "end_turn"
    [block] = message.content
    assert isinstance(block, anthropic.types.TextBlock) and "[[" in block.text
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message._request_id is not None and message._request_id.startswith("req_")
    assert raw.headers["request-id"] == message._request_id
    for name in ("requests", "tokens", "input-tokens", "output-tokens"):
        assert int(raw.headers[f"anthropic-ratelimit-{name}-limit"]) > 0
        assert int(raw.headers[f"anthropic-ratelimit-{name}-remaining"]) >= 0
        assert raw.headers[f"anthropic-ratelimit-{name}-reset"].endswith("Z")


def test_anthropic_extended_thinking(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(
        model="strong", max_tokens=2048, system=SYSTEM, messages=USER,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )  # fmt: skip
    thinking, text = message.content
    assert isinstance(thinking, anthropic.types.ThinkingBlock) and thinking.signature
    assert isinstance(text, anthropic.types.TextBlock) and "[[" in text.text
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 1024
    # The thinking used up max_tokens: only the thinking block is left.
    cut = claude.messages.create(
        model="strong", max_tokens=1030, system=SYSTEM, messages=USER,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )  # fmt: skip
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 1030
    assert [b.type for b in cut.content] == ["thinking"]
    with pytest.raises(anthropic.BadRequestError, match="may only be set to 1"):
        claude.messages.create(
            model="strong", max_tokens=2048, messages=USER, extra_body={"temperature": 0.0},
            extra_headers={"anthropic-version": "2023-06-01"},
            thinking={"type": "enabled", "budget_tokens": 1024},
        )  # fmt: skip
    with pytest.raises(anthropic.BadRequestError, match="budget_tokens"):
        claude.messages.create(
            model="strong", max_tokens=2048, messages=USER,
            thinking={"type": "enabled", "budget_tokens": 512},
        )  # fmt: skip
    without = claude.messages.create(model="strong", max_tokens=2, messages=USER)
    assert without.stop_reason == "max_tokens" and without.usage.output_tokens == 2
    adaptive = claude.messages.create(
        model="strong", max_tokens=1024, messages=USER,
        thinking={"type": "adaptive", "display": "omitted"},
    )  # fmt: skip
    assert [b.type for b in adaptive.content] == ["thinking", "text"]
    assert isinstance(adaptive.content[0], anthropic.types.ThinkingBlock)
    assert adaptive.content[0].thinking == "" and adaptive.content[0].signature


def test_anthropic_sampling_parameters_by_api_version(claude: anthropic.Anthropic) -> None:
    """The SDK's default API version refuses temperature; 2023-06-01 still takes it."""
    for name, value in (("temperature", 1.0), ("top_p", 0.9), ("top_k", 5)):
        with pytest.raises(anthropic.BadRequestError, match="Extra inputs are not permitted"):
            claude.messages.create(
                model="strong", max_tokens=64, messages=USER, extra_body={name: value}
            )
    old = claude.messages.create(
        model="strong", max_tokens=512, messages=USER, extra_body={"temperature": 0.0},
        extra_headers={"anthropic-version": "2023-06-01"},
    )  # fmt: skip
    assert old.stop_reason == "end_turn"


def test_anthropic_faults_raise_the_sdk_exceptions(
    server: SimJudgeServer, claude: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        claude.messages.create(model="always-529", max_tokens=64, messages=USER)
    assert overloaded.value.status_code == 529
    assert isinstance(overloaded.value, anthropic.InternalServerError)
    assert overloaded.value.request_id is not None
    body = overloaded.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "overloaded_error"
    assert body["request_id"] == overloaded.value.request_id
    with pytest.raises(anthropic.RateLimitError) as limited:
        claude.messages.create(model="always-429", max_tokens=64, messages=USER)
    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    with pytest.raises(anthropic.InternalServerError):
        claude.messages.create(model="always-5xx", max_tokens=64, messages=USER)
    with pytest.raises(anthropic.BadRequestError, match="credit balance"):
        claude.messages.create(model="always-quota", max_tokens=64, messages=USER)
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="claude-none", max_tokens=64, messages=USER)
    root = server.base_url.removesuffix("/v1")
    with (
        anthropic.Anthropic(base_url=root, api_key="sk-wrong", max_retries=0) as wrong,
        pytest.raises(anthropic.AuthenticationError) as denied,
    ):
        wrong.messages.create(model="strong", max_tokens=64, messages=USER)
    assert denied.value.request_id is not None


def test_anthropic_version_header_and_keys(server: SimJudgeServer) -> None:
    """The SDK sends `anthropic-version` and a bearer key (the tests above pass); a request
    without the version is a 400, and x-api-key wins over a bearer key."""
    response = httpx.post(
        f"{server.base_url}/messages",
        json={"model": "strong", "max_tokens": 64, "messages": USER},
        headers={"x-api-key": KEY},
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "anthropic-version: header is required"
    assert response.headers["request-id"] == response.json()["request_id"]
    both = httpx.post(
        f"{server.base_url}/messages",
        json={"model": "strong", "max_tokens": 64, "messages": USER},
        headers={"x-api-key": "sk-wrong", "Authorization": f"Bearer {KEY}",
                 "anthropic-version": "2023-06-01"},
    )  # fmt: skip
    assert both.status_code == 401 and both.json()["error"]["message"] == "invalid x-api-key"
