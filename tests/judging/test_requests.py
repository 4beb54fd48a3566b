"""Requests a real API accepts: URLs, headers and bodies per endpoint profile, call keys."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.errors import InputError
from tasks.judging.callkey import call_key, messages_sha256
from tasks.judging.client import CallResult, JudgeClient
from tasks.judging.providers import PROVIDERS, CallRequest
from tasks.prompts.templates import render

MESSAGES = ({"role": "system", "content": "judge"}, {"role": "user", "content": "Q? L | R"})
KEY = "sk-requests-test-5b1e0c"
OPENAI_REPLY = {
    "choices": [{"message": {"role": "assistant", "content": "[[A>B]]"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
}
ANTHROPIC_REPLY = {
    "type": "message",
    "content": [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "[[A>B]]"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 2},
}


def _spec(**kw: Any) -> JudgeSpec:
    base: dict[str, Any] = {"name": "j", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
    base.update(kw)
    return JudgeSpec.model_validate(base)


def _key(spec: JudgeSpec, config: ReasoningConfig | None = None, seed: int = 3) -> str:
    return call_key(
        spec, config or ReasoningConfig(name="c"), seed=seed, repeat=1, template_id="t",
        template_hash="h", messages=MESSAGES,
    )  # fmt: skip


def _body(spec: JudgeSpec, config: ReasoningConfig | None = None, seed: int = 3) -> Any:
    provider = PROVIDERS[spec.provider](spec, None, None)  # type: ignore[arg-type]
    request = CallRequest("k", MESSAGES, seed, config or ReasoningConfig(name="c"))
    return provider.body(request)


def _sent(spec: JudgeSpec, config: ReasoningConfig | None = None) -> httpx.Request:
    """The one request a JudgeClient sends for a call, caught before it leaves the process."""
    caught: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        caught.append(request)
        return httpx.Response(
            200, json=ANTHROPIC_REPLY if spec.provider == "anthropic" else OPENAI_REPLY
        )

    async def go() -> None:
        async with JudgeClient(spec, KEY) as client:
            real = client.http.clients[0]
            client.http = client.provider.http = httpx.AsyncClient(
                base_url=real.base_url, params=real.params, headers=real.headers,
                transport=httpx.MockTransport(answer),
            )  # fmt: skip
            await real.aclose()
            request = CallRequest("ck-1", MESSAGES, 3, config or spec.configs[0])
            result = await client.send(request)
            assert result.reply is not None and result.reply.raw_reply == "[[A>B]]"

    asyncio.run(go())
    [request] = caught
    return request


# --- today's configurations: keys and bodies pinned from the code before profiles ---------

PINNED = [
    ({}, {}, "b0c5484fc1fbbd8f7f5cc134efbcb981e16dc5a02729185cd187f72da2c6cc67",
     '{"model": "m", "messages": [{"role": "system", "content": "judge"}, {"role": "user", '
     '"content": "Q? L | R"}], "temperature": 0.0, "max_tokens": 1024, "seed": 3}'),
    ({"provider": "anthropic"}, {},
     "f8736c46e351afe70e5e46d97f29e9ec344559abd82c745f4dce1c4e7ae89f64",
     '{"model": "m", "messages": [{"role": "user", "content": "Q? L | R"}], "temperature": 0.0, '
     '"max_tokens": 1024, "system": "judge"}'),
    ({"temperature": 0.7, "top_p": 0.9, "max_tokens": 300}, {},
     "ff6651731facc7c1b9f29e3e959263c74e025c9e7fbd4aa1816b12a0336b924e",
     '{"model": "m", "messages": [{"role": "system", "content": "judge"}, {"role": "user", '
     '"content": "Q? L | R"}], "temperature": 0.7, "max_tokens": 300, "seed": 3, "top_p": 0.9}'),
    ({"extra": {"reasoning_effort": "low", "seed": 5}}, {"reasoning_effort": "high"},
     "a9f9e6bc54d2458068abc0cbbb79485bc18f315fde1e29a952169a14e05feb6f",
     '{"model": "m", "messages": [{"role": "system", "content": "judge"}, {"role": "user", '
     '"content": "Q? L | R"}], "temperature": 0.0, "max_tokens": 1024, "seed": 5, '
     '"reasoning_effort": "high"}'),
    ({"provider": "anthropic", "extra": {"stop_sequences": ["x"]}}, {"temperature": 1.0},
     "ad1678e6323f7b5df5d9e0b5b3fdfa2273fea7993d7078ffe9126f652de2c97c",
     '{"model": "m", "messages": [{"role": "user", "content": "Q? L | R"}], "temperature": 1.0, '
     '"max_tokens": 1024, "stop_sequences": ["x"], "system": "judge"}'),
]  # fmt: skip


@pytest.mark.parametrize(("judge", "config_extra", "key", "body"), PINNED)
def test_todays_configs_keep_their_keys_bodies_and_dumps(
    judge: dict[str, Any], config_extra: dict[str, Any], key: str, body: str
) -> None:
    spec = _spec(**judge)
    config = ReasoningConfig(name="c", extra=config_extra)
    assert _key(spec, config) == key
    # Without prompt caching, today's body exactly; with it, the same key (caching fields
    # never enter it).
    off = _spec(**judge, prompt_cache="off")
    assert json.dumps(_body(off, config)) == body and _key(off, config) == key
    assert _body(spec, config) != _body(off, config)
    dumped = spec.model_dump(mode="json")
    assert set(dumped) == {
        "name", "provider", "base_url", "model", "api_key_env", "api_key_secret", "temperature",
        "top_p", "max_tokens", "extra", "configs", "timeout_s", "max_concurrency",
        "requests_per_minute", "max_retries",
    }  # fmt: skip
    assert dumped["configs"] == [{"name": "default", "extra": {}}]
    assert JudgeSpec.model_validate(dumped) == spec


# --- each profile's URL, headers and body --------------------------------------------------


def test_openai_reasoning_model() -> None:
    spec = _spec(
        base_url="https://api.openai.com/v1", model="o4-mini", reasoning=True,
        configs=[{"name": "high", "reasoning_effort": "high"}],
    )  # fmt: skip
    sent = _sent(spec)
    assert str(sent.url) == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert "x-judgeline-call-key" not in sent.headers
    assert json.loads(sent.content) == {
        "model": "o4-mini", "messages": list(MESSAGES), "max_completion_tokens": 4096,
        "seed": 3, "reasoning_effort": "high",
        "prompt_cache_key": "judgeline-" + messages_sha256(MESSAGES)[:40],
    }  # fmt: skip


@pytest.mark.parametrize("base_url", ["https://api.anthropic.com", "https://api.anthropic.com/v1/"])
def test_claude_with_thinking(base_url: str) -> None:
    spec = _spec(
        provider="anthropic", base_url=base_url, model="claude-sonnet-4-5",
        thinking={"type": "enabled", "budget_tokens": 2000},
        anthropic_beta=["interleaved-thinking-2025-05-14"], stop="###",
    )  # fmt: skip
    sent = _sent(spec)
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == KEY and "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    # The prompt's last block carries the cache breakpoint: the K repeats share all of it.
    marked = {
        "type": "text",
        "text": MESSAGES[1]["content"],
        "cache_control": {"type": "ephemeral"},
    }
    assert json.loads(sent.content) == {
        "model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [marked]}],
        "max_tokens": 3024, "stop_sequences": ["###"],
        "thinking": {"type": "enabled", "budget_tokens": 2000}, "system": "judge",
    }  # fmt: skip


def test_azure_deployment_and_v1_urls() -> None:
    deployment = _spec(
        profile="azure", model="gpt-4o",
        base_url="https://res.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21",
    )  # fmt: skip
    sent = _sent(deployment)
    assert str(sent.url) == (
        "https://res.openai.azure.com/openai/deployments/gpt-4o/chat/completions"
        "?api-version=2024-10-21"
    )
    assert sent.headers["api-key"] == KEY and "authorization" not in sent.headers
    assert json.loads(sent.content)["seed"] == 3

    v1 = _spec(
        profile="azure", model="my-o3", reasoning=True,
        base_url="https://res.openai.azure.com//openai/v1/",
    )  # fmt: skip
    sent = _sent(v1)
    assert str(sent.url) == "https://res.openai.azure.com/openai/v1/chat/completions"
    body = json.loads(sent.content)
    assert "temperature" not in body and body["max_completion_tokens"] == 4096

    with pytest.raises(ValidationError, match="api-version"):
        _spec(profile="azure", base_url="https://res.openai.azure.com/openai/deployments/d")
    with pytest.raises(ValidationError, match="/openai/v1"):
        _spec(profile="azure", base_url="https://res.openai.azure.com")


def test_generic_server_sends_seed_only_when_set() -> None:
    spec = _spec(
        profile="openai_compatible", base_url="http://localhost:4000", model="llama",
        headers={"X-Title": "judgeline"}, query={"tenant": "a b"},
    )  # fmt: skip
    sent = _sent(spec)
    assert str(sent.url) == "http://localhost:4000/chat/completions?tenant=a+b"
    assert sent.headers["x-title"] == "judgeline"
    assert json.loads(sent.content) == {
        "model": "llama", "messages": list(MESSAGES), "temperature": 0.0, "max_tokens": 1024,
    }  # fmt: skip
    assert _body(_spec(profile="openai_compatible", seed="plan"))["seed"] == 3
    assert _body(_spec(profile="openai_compatible", seed=11))["seed"] == 11


def test_null_removes_a_field_and_a_config_overrides_its_judge() -> None:
    spec = _spec(
        temperature=None, max_tokens=None, seed=None, system_role="developer", prompt_cache="off"
    )
    assert _body(spec) == {"model": "m", "messages": [{"role": "developer", "content": "judge"},
                                                       MESSAGES[1]]}  # fmt: skip
    judge = _spec(top_p=0.5, reasoning_effort="low")
    config = ReasoningConfig(name="c", top_p=None, temperature=0.3, system_role="user")
    body = _body(judge, config)
    assert "top_p" not in body and body["temperature"] == 0.3
    assert body["reasoning_effort"] == "low"
    assert body["messages"] == [{"role": "user", "content": "judge\n\nQ? L | R"}]
    claude = _spec(provider="anthropic", max_tokens=8000)
    thinking = ReasoningConfig(name="t", thinking={"type": "enabled", "budget_tokens": 4000})
    body = _body(claude, thinking)
    assert "temperature" not in body and body["max_tokens"] == 8000
    assert ReasoningConfig.model_validate(config.model_dump()) == config
    assert config.model_dump() == {
        "name": "c",
        "extra": {},
        "temperature": 0.3,
        "top_p": None,
        "system_role": "user",
    }


def test_bad_fields_are_named() -> None:
    cases = [
        ({"provider": "anthropic", "reasoning_effort": "low"}, "reasoning_effort"),
        ({"provider": "anthropic", "configs": [{"name": "s", "seed": "plan"}]}, "config 's'.*seed"),
        ({"provider": "anthropic", "max_tokens": None}, "max_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": 10}}, "thinking"),
        ({"headers": {"Authorization": "x"}}, "headers.Authorization"),
        ({"anthropic_beta": ["b"]}, "anthropic_beta"),
        ({"profile": "anthropic", "provider": "openai"}, "profile"),
        (
            {"provider": "anthropic", "max_tokens": 100, "thinking": {"budget_tokens": 1024}},
            "budget_tokens",
        ),
        ({"headers": {"X-Key": {"env": "A", "secret": "B"}}}, "headers.X-Key"),
        ({"tempreature": 0}, "tempreature"),
        (
            {"provider": "anthropic", "thinking": {"type": "enabled", "budget_tokens": 1000}},
            "budget_tokens must be at least 1024",
        ),
        (
            {"provider": "anthropic", "anthropic_version": "2026-10-21", "temperature": 0.0},
            "temperature: removed in Messages API version 2026-10-21",
        ),
    ]
    for fields, message in cases:
        with pytest.raises(ValidationError, match=message):
            _spec(**fields)
    assert _spec(profile="anthropic").provider == "anthropic"


def test_claude_on_the_version_without_sampling_sends_no_temperature() -> None:
    # Messages API 2026-10-21 removed temperature, top_p and top_k; 2023-06-01 keeps them.
    newer = _spec(provider="anthropic", anthropic_version="2026-10-21")
    assert newer.temperature is None and "temperature" not in _body(newer)
    assert JudgeSpec.model_validate(newer.model_dump(mode="json")) == newer
    assert _body(_spec(provider="anthropic"))["temperature"] == 0.0


# --- the call key -------------------------------------------------------------------------


def test_keys_change_with_decoding_fields_only() -> None:
    base = _key(_spec())
    same = {
        "headers": _spec(headers={"X-Title": "t", "HTTP-Referer": "https://x.org"}),
        "query": _spec(query={"api-version": "2024-10-21"}),
        "simulated": _spec(simulated=True),
        "base url": _spec(base_url="https://api.openai.com/v1?x=1"),
        "azure": _spec(profile="azure", base_url="https://r.openai.azure.com/openai/v1"),
        "plan seed said": _spec(seed="plan"),
        "timeouts": _spec(timeout_s=1, max_concurrency=1, max_retries=0),
    }
    for what, spec in same.items():
        assert _key(spec) == base, what
    changed = {
        "reasoning": _spec(reasoning=True),
        "no temperature": _spec(temperature=None),
        "no seed": _spec(seed=None),
        "fixed seed": _spec(seed=9),
        "stop": _spec(stop=["x"]),
        "response_format": _spec(response_format={"type": "json_object"}),
        "reasoning_effort": _spec(reasoning_effort="low"),
        "system_role": _spec(system_role="developer"),
        "config temperature": _spec(configs=[{"name": "c", "temperature": 0.5}]),
    }
    keys = {what: _key(spec, spec.configs[0]) for what, spec in changed.items()}
    for what, key in keys.items():
        assert key != base, what
    assert len(set(keys.values())) == len(keys)
    unseeded = _spec(seed=None)
    assert _key(unseeded, seed=3) != _key(unseeded, seed=4)  # repeats stay distinct calls
    claude = _spec(provider="anthropic")
    anthropic_keys = {
        _key(claude),
        _key(_spec(provider="anthropic", anthropic_beta=["b-1"])),
        _key(_spec(provider="anthropic", anthropic_version="2024-01-01")),
        _key(_spec(provider="anthropic", thinking={"type": "enabled", "budget_tokens": 1024})),
    }
    assert len(anthropic_keys) == 4
    assert _key(claude, seed=3) != _key(claude, seed=4)  # repeats without a sent seed


# --- secrets and the simulated judge over loopback ------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(api_key=KEY) as srv:
        yield srv


def _send_real(spec: JudgeSpec, requests: list[CallRequest]) -> list[CallResult]:
    async def go() -> list[CallResult]:
        async with JudgeClient(spec, KEY, run_id="r") as client:
            return [await client.send(r) for r in requests]

    return asyncio.run(go())


def test_call_key_header_goes_to_the_simulated_judge_only(server: SimJudgeServer) -> None:
    prompt = render("arena-hard-v1", question="2+2?", left="4", right="5")
    config = ReasoningConfig(name="d")
    requests = [CallRequest(f"ck-{s}", prompt.messages, s, config) for s in range(2)]
    for simulated in (False, True):
        server.clear_log()
        spec = _spec(
            base_url=server.base_url, model="strong", profile="openai_compatible",
            simulated=simulated,
        )  # fmt: skip
        results = _send_real(spec, requests)
        assert all(r.reply is not None for r in results)
        keys = [e["call_key"] for e in server.request_log()]
        assert keys == (["ck-0", "ck-1"] if simulated else [None, None])


def test_secret_headers_come_from_env_and_are_never_recorded(
    server: SimJudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hdr-secret-7d2a91"
    monkeypatch.setenv("JUDGELINE_TEST_HEADER", secret)
    spec = _spec(
        base_url=server.base_url, model="strong", simulated=True,
        headers={"X-Gateway-Key": {"env": "JUDGELINE_TEST_HEADER"}},
    )  # fmt: skip
    assert secret not in json.dumps(spec.model_dump(mode="json"))
    server.clear_log()
    prompt = render("arena-hard-v1", question="2+2?", left="4", right="5")
    ok = CallRequest("ck-ok", prompt.messages, 0, ReasoningConfig(name="d"))
    missing = _spec(**{**spec.model_dump(), "model": "no-such-model", "max_retries": 0})
    results = _send_real(spec, [ok]) + _send_real(missing, [ok])
    assert results[0].reply is not None and results[1].failure is not None
    recorded = [r.reply.model_dump_json() for r in results if r.reply]
    recorded += [a.model_dump_json() for r in results for a in r.attempts]
    assert secret not in "".join(recorded) + json.dumps(server.request_log())
    assert len(server.request_log()) == 2

    caught = _sent(_spec(base_url="https://gw.example/v1", headers=spec.headers))
    assert caught.headers["x-gateway-key"] == secret
    monkeypatch.delenv("JUDGELINE_TEST_HEADER")
    with pytest.raises(InputError, match="JUDGELINE_TEST_HEADER is not set"):
        _sent(_spec(headers=spec.headers))
