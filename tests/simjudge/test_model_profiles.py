"""The simulated judge's model profiles refuse what the vendors refuse, with their words.

OpenAI Chat Completions: `reasoning_effort` on a model that does not reason is an
unrecognized argument; each reasoning family takes its own efforts (o-series low to high,
gpt-5 minimal to high, gpt-5.1 none to high, gpt-5.2 none to xhigh, gpt-5.6 none to max; the
pro and codex models through the Responses API only); a reasoning model takes
no temperature or top_p but 1, except gpt-5.1 and later at effort none. Anthropic: Claude
Opus 4.1, Sonnet and Haiku 4.5 and later refuse `temperature` with `top_p`. Names the judge
does not know (personas, open models) keep every field.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from simjudge.persona import Persona
from simjudge.rules import anthropic_problem, openai_problem, responses_only
from simjudge.server import SimJudgeServer

VERSION = {"anthropic-version": "2023-06-01"}


def _openai(model: str, **fields: Any) -> tuple[str | None, str | None, str | None]:
    problem = openai_problem(fields, model, responses=responses_only(model))
    return (None, None, None) if problem is None else (problem.message, problem.param,
                                                        problem.code)  # fmt: skip


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-5-chat-latest",
                                   "openai/gpt-4o-mini", "gpt-4o-mini-2024-07-18"])  # fmt: skip
def test_a_model_that_does_not_reason_refuses_reasoning_effort(model: str) -> None:
    assert _openai(model, reasoning_effort="low") == (
        "Unrecognized request argument supplied: reasoning_effort",
        None,
        None,
    )
    assert _openai(model, temperature=0.0, max_tokens=1024) == (None, None, None)


@pytest.mark.parametrize(
    ("model", "accepted", "refused"),
    [
        ("o4-mini", ("low", "medium", "high"), ("none", "minimal", "xhigh")),
        ("o3", ("low", "medium", "high"), ("minimal",)),
        ("gpt-5-mini", ("minimal", "low", "medium", "high"), ("none", "xhigh")),
        ("gpt-5.1", ("none", "low", "medium", "high"), ("minimal", "xhigh")),
        ("gpt-5.2", ("none", "low", "medium", "high", "xhigh"), ("minimal",)),
        ("gpt-5-pro", ("high",), ("low", "medium")),
        ("gpt-5.6-terra", ("none", "low", "medium", "high", "xhigh", "max"), ("minimal",)),
        ("gpt-5.6-pro", ("none", "low", "medium", "high", "xhigh", "max"), ("minimal",)),
    ],
)
def test_each_reasoning_family_takes_its_own_efforts(
    model: str, accepted: tuple[str, ...], refused: tuple[str, ...]
) -> None:
    for effort in accepted:
        assert _openai(model, reasoning_effort=effort) == (None, None, None), effort
    listed = ", ".join(f"'{e}'" for e in accepted[:-1])
    values = f"{listed}, and '{accepted[-1]}'" if len(accepted) > 2 else (
        " and ".join(f"'{e}'" for e in accepted)
    )  # fmt: skip
    for effort in refused:
        assert _openai(model, reasoning_effort=effort) == (
            f"Unsupported value: '{effort}' is not supported with the '{model}' model. "
            f"Supported values are: {values}.",
            "reasoning_effort",
            "unsupported_value",
        )


def test_reasoning_models_take_no_sampling_but_at_effort_none() -> None:
    for model, effort in (("o4-mini", None), ("gpt-5-mini", None), ("gpt-5.2", "medium")):
        message, param, code = _openai(model, temperature=0.0, reasoning_effort=effort)
        assert (param, code) == ("temperature", "unsupported_value")
        assert message is not None and "Only the default (1) value is supported" in message
        assert _openai(model, top_p=0.5, reasoning_effort=effort)[1:] == (
            "top_p",
            "unsupported_value",
        )
        assert _openai(model, temperature=1, reasoning_effort=effort) == (None, None, None)
    # gpt-5.1 and later reason at effort none by default: sampling works there, not above.
    assert _openai("gpt-5.1", temperature=0.0) == (None, None, None)
    assert _openai("gpt-5.2", temperature=0.0, reasoning_effort="none") == (None, None, None)
    assert _openai("gpt-5.1", temperature=0.0, reasoning_effort="low")[1] == "temperature"


def test_unknown_names_keep_every_field() -> None:
    for model in ("strong", "Qwen/Qwen2.5-7B-Instruct", "meta-llama/llama-3.3-70b-instruct"):
        assert _openai(model, temperature=0.0, reasoning_effort="high") == (None, None, None)


def test_newer_claude_models_take_temperature_or_top_p_not_both() -> None:
    body = {"max_tokens": 1024, "temperature": 0.0, "top_p": 0.9}
    for model in ("claude-sonnet-4-5", "claude-haiku-4-5-20251001", "claude-opus-4-1"):
        problem = anthropic_problem(body | {"model": model}, VERSION, require_version=True)
        assert problem is not None and problem.message == (
            "`temperature` and `top_p` cannot both be specified for this model. Please use "
            "only one."
        )
        for one in ("temperature", "top_p"):
            alone = {k: v for k, v in body.items() if k != one} | {"model": model}
            assert anthropic_problem(alone, VERSION, require_version=True) is None
    older = body | {"model": "claude-3-5-haiku-20241022"}
    assert anthropic_problem(older, VERSION, require_version=True) is None


def test_the_old_readme_example_is_refused_over_http() -> None:
    """gpt-4o-mini with `extra: {reasoning_effort: low}`: a 400 as the OpenAI API answers."""
    with (
        SimJudgeServer([Persona(name="gpt-4o-mini", skill=0.9)]) as server,
        httpx.Client() as client,
    ):
        body = {
            "model": "gpt-4o-mini", "temperature": 0.0, "max_tokens": 1024,
            "reasoning_effort": "low", "messages": [{"role": "user", "content": "Hi"}],
        }  # fmt: skip
        response = client.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "Unrecognized request argument supplied: reasoning_effort"
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", None, None)


@pytest.mark.parametrize(
    "model", ["gpt-5-pro", "gpt-5.2-pro", "gpt-5.1-codex", "gpt-5.6-codex-max"]
)
def test_pro_and_codex_models_are_served_by_the_responses_api_only(model: str) -> None:
    assert _openai(model) == (None, None, None)
    problem = openai_problem({}, model)
    assert problem is not None and "only supported in v1/responses" in problem.message
    assert openai_problem({}, "gpt-5.2") is None


def test_prompt_cache_options_from_gpt_5_6_on() -> None:
    options = {"prompt_cache_options": {"mode": "implicit", "ttl": "30m"}}
    assert openai_problem(options, "gpt-5.6-terra") is None
    refused = openai_problem(options, "gpt-5.2")
    assert refused is not None and refused.param == "prompt_cache_options"
