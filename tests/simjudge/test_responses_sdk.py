"""The Responses API and structured verdicts, as the official SDKs send and read them.

The simulated judge serves `POST /v1/responses` (and Azure's `/openai/v1/responses`) so that
`openai` 3.57's `responses.create`, `responses.parse` (a pydantic model) and a Batch of
`/v1/responses` lines work against it; and for every README judge of the new profiles
judgeline's method, path, query and body equal what the SDK sends for the same call (the
simulated judge's request log holds both).
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from typing import Any, Literal

import anthropic
import openai
import pydantic
import pytest

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.judging.client import JudgeClient
from tasks.judging.providers import CallRequest
from tasks.prompts.templates import render
from tasks.prompts.verdicts import format_field

KEY = "sk-responses-sdk-77"
PROMPT = render("arena-hard-v1", question="What is 6 x 7?", left="42", right="It is 41.")
SYSTEM = PROMPT.messages[0]["content"]
USER: list[Any] = [PROMPT.messages[1]]


class Verdict(pydantic.BaseModel):
    reasoning: str
    verdict: Literal["A>>B", "A>B", "A=B", "B>A", "B>>A", "ABSTAIN"]


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    models = ("gpt-5.6-terra", "gpt-5.2-pro", "gpt-5.1-codex", "claude-sonnet-4-5", "strong",
              "gemini-2.5-flash")  # fmt: skip
    personas = [Persona(name=m, skill=0.9) for m in models]
    personas.append(Persona(name="refuser", refusal_rate=1.0))
    with SimJudgeServer(personas, api_key=KEY, require_anthropic_version=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def oai(server: SimJudgeServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
        yield client


def test_responses_create_every_effort_the_sdk_lists(oai: openai.OpenAI) -> None:
    for effort in ("none", "low", "medium", "high", "xhigh", "max"):
        done = oai.responses.create(
            model="gpt-5.6-terra", instructions=SYSTEM, input=USER, store=False,
            max_output_tokens=8000, reasoning={"effort": effort},
        )  # fmt: skip
        assert isinstance(done, openai.types.responses.Response)
        assert done.status == "completed" and "[[" in done.output_text, effort
        assert done.usage is not None
        assert done.usage.output_tokens_details.reasoning_tokens >= 0
        assert done.usage.input_tokens_details.cache_write_tokens == 0  # below 1,024 tokens
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="gpt-5.6-terra", input=USER, reasoning={"effort": "minimal"})
    assert refused.value.param == "reasoning_effort"
    with pytest.raises(openai.BadRequestError) as chat:
        oai.chat.completions.create(model="gpt-5.2-pro", messages=list(PROMPT.messages))
    assert "only supported in v1/responses" in chat.value.message


def test_responses_parse_with_a_pydantic_model(oai: openai.OpenAI) -> None:
    parsed = oai.responses.parse(
        model="gpt-5.2-pro", instructions=SYSTEM, input=USER, text_format=Verdict,
        max_output_tokens=4000,
    )  # fmt: skip
    assert isinstance(parsed.output_parsed, Verdict)
    assert parsed.output_parsed.reasoning
    # A chat completion held to the same schema parses too.
    chat = oai.chat.completions.parse(
        model="strong", messages=list(PROMPT.messages), response_format=Verdict
    )
    assert isinstance(chat.choices[0].message.parsed, Verdict)


def test_refusals_and_replies_cut_by_the_limit(oai: openai.OpenAI) -> None:
    refused = oai.responses.create(model="refuser", input=USER)
    [message] = refused.output
    assert isinstance(message, openai.types.responses.ResponseOutputMessage)
    assert isinstance(message.content[0], openai.types.responses.ResponseOutputRefusal)
    chat = oai.chat.completions.create(model="refuser", messages=list(PROMPT.messages))
    assert chat.choices[0].message.refusal and chat.choices[0].message.content is None
    cut = oai.responses.create(
        model="gpt-5.2-pro", input=USER, max_output_tokens=100, reasoning={"effort": "high"}
    )
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in cut.output] == ["reasoning"]
    with pytest.raises(openai.BadRequestError):
        oai.responses.create(model="strong", input=USER, extra_body={"seed": 1})


def test_a_batch_of_responses_lines(server: SimJudgeServer, oai: openai.OpenAI) -> None:
    server.judge.batches.settings.delay_s = 0.2
    lines = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/responses",
         "body": {"model": "gpt-5.2-pro", "instructions": SYSTEM, "input": USER,
                  "store": False, "max_output_tokens": 4000 + i}}
        for i in range(3)
    ]  # fmt: skip
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    uploaded = oai.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    batch = oai.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/responses", completion_window="24h"
    )
    assert batch.endpoint == "/v1/responses"
    time.sleep(0.3)
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    out = [json.loads(x) for x in oai.files.content(done.output_file_id).text.splitlines()]
    assert sorted(o["custom_id"] for o in out) == ["c0", "c1", "c2"]
    assert {o["response"]["body"]["object"] for o in out} == {"response"}
    wrong = oai.files.create(file=("w.jsonl", io.BytesIO(data)), purpose="batch")
    mixed = oai.batches.create(
        input_file_id=wrong.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert mixed.status == "failed" and mixed.errors is not None


# --- judgeline sends what the SDK sends ----------------------------------------------------


def _judgeline(server: SimJudgeServer, raw: dict[str, Any]) -> dict[str, Any]:
    """One call of the judge's first config through judgeline; its request log entry."""
    spec = JudgeSpec.model_validate({**raw, "simulated": False})
    server.clear_log()

    async def send() -> None:
        async with JudgeClient(spec, KEY) as client:
            result = await client.send(
                CallRequest(
                    call_key="k", messages=PROMPT.messages, seed=3, config=spec.configs[0],
                    template_id=PROMPT.template_id,
                )
            )  # fmt: skip
            assert result.reply is not None, result.failure

    asyncio.run(send())
    [entry] = server.request_log()
    return entry


def _sdk(server: SimJudgeServer, call: Any) -> dict[str, Any]:
    server.clear_log()
    call()
    [entry] = server.request_log()
    return entry


def _same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    for part in ("path", "query", "fields", "messages_sha256", "status"):
        assert ours[part] == theirs[part], (part, ours[part], theirs[part])


def test_judgeline_sends_what_the_openai_sdk_sends(server: SimJudgeServer) -> None:
    root = server.base_url.removesuffix("/v1")
    schema = format_field("responses", "arena-hard-v1")[1]
    pro = {"name": "pro", "profile": "openai-responses", "base_url": server.base_url,
           "model": "gpt-5.2-pro", "reasoning": True, "verdict": "json",
           "configs": [{"name": "x", "reasoning_effort": "xhigh",
                        "max_tokens": 16000}]}  # fmt: skip
    ours = _judgeline(server, pro)
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as sdk:
        theirs = _sdk(server, lambda: sdk.responses.create(
            model="gpt-5.2-pro", instructions=SYSTEM, input=USER, max_output_tokens=16000,
            reasoning={"effort": "xhigh"}, store=False, text=schema,  # type: ignore[arg-type]
            prompt_cache_key=ours["fields"]["prompt_cache_key"],
        ))  # fmt: skip
    _same(ours, theirs)
    assert ours["fields"]["store"] is False and "seed" not in ours["fields"]
    codex = {"name": "codex", "profile": "azure-responses", "base_url": f"{root}/openai/v1/",
             "model": "gpt-5.1-codex", "reasoning": True}  # fmt: skip
    ours = _judgeline(server, codex)
    assert "api-key" in ours["headers"] and "authorization" not in ours["headers"]
    with openai.OpenAI(base_url=f"{root}/openai/v1/", api_key=KEY, max_retries=0) as azure:
        theirs = _sdk(server, lambda: azure.responses.create(
            model="gpt-5.1-codex", instructions=SYSTEM, input=USER, max_output_tokens=4096,
            store=False,
        ))  # fmt: skip
    _same(ours, theirs)
    gemini = {"name": "gemini", "profile": "gemini", "model": "gemini-2.5-flash",
              "base_url": f"{root}/v1beta/openai/", "reasoning_effort": "low"}  # fmt: skip
    ours = _judgeline(server, gemini)
    with openai.OpenAI(base_url=f"{root}/v1beta/openai/", api_key=KEY, max_retries=0) as google:
        theirs = _sdk(server, lambda: google.chat.completions.create(
            model="gemini-2.5-flash", messages=list(PROMPT.messages), temperature=0.0,
            max_tokens=1024, reasoning_effort="low",
        ))  # fmt: skip
    _same(ours, theirs)
    chat = {"name": "chat", "base_url": server.base_url, "model": "strong", "verdict": "json"}
    ours = _judgeline(server, chat)
    fmt = format_field("chat", "arena-hard-v1")[1]
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as sdk:
        theirs = _sdk(server, lambda: sdk.chat.completions.create(
            model="strong", messages=list(PROMPT.messages), temperature=0.0, max_tokens=1024,
            seed=3, response_format=fmt,  # type: ignore[arg-type]
            prompt_cache_key=ours["fields"]["prompt_cache_key"],
        ))  # fmt: skip
    _same(ours, theirs)


def test_judgeline_sends_what_the_anthropic_sdk_sends(server: SimJudgeServer) -> None:
    claude = {"name": "claude", "provider": "anthropic", "model": "claude-sonnet-4-5",
              "base_url": server.base_url.removesuffix("/v1"), "verdict": "json",
              "prompt_cache": "off", "anthropic_version": "2026-10-21"}  # fmt: skip
    ours = _judgeline(server, claude)
    config = format_field("anthropic", "arena-hard-v1")[1]
    root = server.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key=KEY, max_retries=0) as sdk:
        theirs = _sdk(server, lambda: sdk.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, system=SYSTEM, messages=USER,
            output_config=config,  # type: ignore[arg-type,call-arg,unused-ignore]
        ))  # fmt: skip
    _same(ours, theirs)
