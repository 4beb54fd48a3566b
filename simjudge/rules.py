"""The simulated judge's request rules: what each API refuses, and how it says so.

Model profiles follow the model name (with or without a `provider/` prefix or a date) as
OpenAI's do, read on 2026-11-30 from its reasoning guide and the errors its API returns:

- models that do not reason (`gpt-3.5*`, `gpt-4*`, `gpt-4o*`, `gpt-4.1*`, `chatgpt-*`,
  every `-chat` variant) refuse `reasoning_effort` as an unrecognized argument;
- reasoning models refuse `max_tokens` (they take `max_completion_tokens`), and a
  temperature or top_p other than 1, except gpt-5.1 and later at effort `none` (their
  default), and each family takes its own efforts: o-series `low` to `high`, gpt-5 `minimal`
  to `high`, gpt-5-pro `high` only, gpt-5.1 `none` to `high`, gpt-5.2 to gpt-5.5 `none` to
  `xhigh`, gpt-5.6 and later `none` to `max`;
- the pro and codex models (`gpt-5-pro`, `gpt-5.2-codex`, ...) are served by the Responses
  API only: chat completions answer 400;
- gpt-5.6 and later take `prompt_cache_options` and report the prompt tokens written to the
  cache (`cache_write_tokens`); earlier models refuse the field;
- any other name (the personas, open models behind compatible servers) takes every field.

The Messages API wants `anthropic-version` and `max_tokens`; from version 2026-10-21 on it
refuses `temperature`, `top_p` and `top_k` whatever their value; Claude Opus 4.1, Sonnet and
Haiku 4.5 and later refuse `temperature` with `top_p`; with extended thinking it wants a
budget of at least 1024 tokens below `max_tokens` and no temperature other than 1.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from tasks.prompts.profiles import (
    OpenAIModel,
    is_reasoning_model,
    openai_model,
    responses_only,
    takes_cache_options,
)

__all__ = [
    "MIN_THINKING_BUDGET",
    "SAMPLING_FREE_VERSION",
    "OpenAIModel",
    "Problem",
    "anthropic_problem",
    "is_reasoning_model",
    "is_vendor_model",
    "openai_model",
    "openai_problem",
    "reply_limit",
    "responses_only",
    "takes_cache_options",
    "thinking_budget",
]

MIN_THINKING_BUDGET = 1024
_VENDOR_NAME = re.compile(
    r"^(?:claude-(?:(?:opus|sonnet|haiku)-\d|\d(?:-\d)?-(?:opus|sonnet|haiku))|gemini-\d)"
)
"""Claude (`claude-sonnet-4-5`, `claude-3-5-haiku-...`) and Gemini (`gemini-2.5-flash`)
model names."""


def is_vendor_model(model: str) -> bool:
    """Whether `model` is named like an OpenAI, Anthropic or Google model (a `provider/`
    prefix or a date suffix allowed): a name the rules above hold a request to."""
    name = model.rsplit("/", 1)[-1]
    return openai_model(name) is not None or _VENDOR_NAME.match(name) is not None


# The Messages API version that dropped the sampling parameters (SDKs send it by default).
SAMPLING_FREE_VERSION = "2026-10-21"
_THINKING_TYPES = ("enabled", "adaptive", "disabled", "between_tools")
_ONE_SAMPLER = re.compile(r"^claude-(?:opus-4-[1-9]|(?:sonnet|haiku)-4-[5-9]|[a-z]+-[5-9])")
_THINKING_DOCS = (
    "Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


class Problem(NamedTuple):
    """A refused request: HTTP status, error kind (see `wire`), message, param and code."""

    status: int
    kind: str
    message: str
    param: str | None = None
    code: str | None = None


def _values(efforts: tuple[str, ...]) -> str:
    """`'a'`, `'a' and 'b'`, `'a', 'b', and 'c'`: as OpenAI lists supported values."""
    quoted = [f"'{e}'" for e in efforts]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def _positive_int(body: Mapping[str, Any], name: str) -> Problem | None:
    value = body.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return Problem(
        400, "invalid_request", f"Invalid '{name}': expected an integer of at least 1.",
        name, "invalid_value",
    )  # fmt: skip


def openai_problem(
    body: Mapping[str, Any], model: str, *, responses: bool = False
) -> Problem | None:
    """What a chat completions request (`responses`: the chat view of a Responses request)
    breaks for this model, if anything."""
    for name in ("max_tokens", "max_completion_tokens"):
        problem = _positive_int(body, name)
        if problem is not None:
            return problem
    if not responses and responses_only(model):
        return Problem(
            400, "invalid_request",
            "This model is only supported in v1/responses and not in v1/chat/completions.",
            "model", "unsupported_value",
        )  # fmt: skip
    if "prompt_cache_options" in body and not takes_cache_options(model):
        return Problem(
            400, "invalid_request",
            "Unsupported parameter: 'prompt_cache_options' is not supported with this model.",
            "prompt_cache_options", "unsupported_parameter",
        )  # fmt: skip
    profile = openai_model(model)
    if profile is None:
        return None
    effort = body.get("reasoning_effort")
    if not profile.reasoning:
        if effort is None:
            return None
        return Problem(
            400, "invalid_request", "Unrecognized request argument supplied: reasoning_effort"
        )
    if effort is not None and effort not in profile.efforts:
        return Problem(
            400, "invalid_request",
            f"Unsupported value: '{effort}' is not supported with the "
            f"'{model.rsplit('/', 1)[-1]}' model. Supported values are: "
            f"{_values(profile.efforts)}.",
            "reasoning_effort", "unsupported_value",
        )  # fmt: skip
    sampling = (effort or profile.default_effort) == "none"
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and value != 1 and not sampling:
            return Problem(
                400, "invalid_request",
                f"Unsupported value: '{name}' does not support {value} with this model. "
                "Only the default (1) value is supported.",
                name, "unsupported_value",
            )  # fmt: skip
    if body.get("max_tokens") is not None:
        return Problem(
            400, "invalid_request",
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "max_tokens", "unsupported_parameter",
        )  # fmt: skip
    return None


def thinking_budget(body: Mapping[str, Any]) -> int | str | None:
    """A (checked) Messages request's thinking: its budget, "adaptive", or None (none)."""
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "adaptive":
        return "adaptive"
    if kind == "enabled" and isinstance(thinking, dict):
        budget = thinking.get("budget_tokens")
        return budget if isinstance(budget, int) else None
    return None


def anthropic_problem(
    body: Mapping[str, Any], headers: Mapping[str, str], *, require_version: bool
) -> Problem | None:
    """What a Messages request breaks (header, thinking, temperature), if anything."""
    version = headers.get("anthropic-version")
    if require_version and not version:
        return Problem(400, "invalid_request", "anthropic-version: header is required")
    if version and version >= SAMPLING_FREE_VERSION:
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                return Problem(400, "invalid_request", f"{name}: Extra inputs are not permitted")
    beta = headers.get("anthropic-beta") or ""
    if "output_format" in body and "structured-outputs-2025-11-13" not in beta:
        return Problem(
            400, "invalid_request",
            "output_format: Extra inputs are not permitted (use output_config.format, or the "
            "structured-outputs-2025-11-13 beta)",
        )  # fmt: skip
    model = str(body.get("model") or "").rsplit("/", 1)[-1]
    sampled = body.get("temperature") is not None and body.get("top_p") is not None
    if sampled and _ONE_SAMPLER.match(model):
        return Problem(
            400, "invalid_request",
            "`temperature` and `top_p` cannot both be specified for this model. Please use "
            "only one.",
        )  # fmt: skip
    thinking = body.get("thinking")
    if thinking is None:
        return None
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in _THINKING_TYPES:
        allowed = ", ".join(f"'{k}'" for k in _THINKING_TYPES)
        return Problem(400, "invalid_request", f"thinking.type: Input should be one of {allowed}")
    if kind != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool):
        return Problem(400, "invalid_request", "thinking.enabled.budget_tokens: Field required")
    if budget < MIN_THINKING_BUDGET:
        return Problem(
            400, "invalid_request",
            "thinking.enabled.budget_tokens: Input should be greater than or equal to "
            f"{MIN_THINKING_BUDGET}",
        )  # fmt: skip
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and budget >= max_tokens:
        return Problem(
            400, "invalid_request",
            f"`max_tokens` must be greater than `thinking.budget_tokens`. {_THINKING_DOCS}",
        )  # fmt: skip
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return Problem(
            400, "invalid_request",
            f"`temperature` may only be set to 1 when thinking is enabled. {_THINKING_DOCS}",
        )  # fmt: skip
    return None


def reply_limit(body: Mapping[str, Any]) -> int | None:
    """The reply's token limit: `max_completion_tokens`, else `max_tokens` (None: no limit)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
