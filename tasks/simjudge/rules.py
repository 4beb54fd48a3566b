"""The simulated judge's request rules: what each API refuses, and how it says so.

Model profiles follow the model name as OpenAI's do: reasoning models (`o1`, `o3`, `o4-mini`,
`gpt-5*` except the `-chat` variants, with or without a `provider/` prefix) refuse a
temperature other than 1 and `max_tokens`, and accept `max_completion_tokens`. The
Messages API wants `anthropic-version` and `max_tokens`; from version 2026-10-21 on it
refuses `temperature`, `top_p` and `top_k` whatever their value; with extended thinking it
wants a budget of at least 1024 tokens below `max_tokens` and no temperature other than 1.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = [
    "MIN_THINKING_BUDGET",
    "SAMPLING_FREE_VERSION",
    "Problem",
    "anthropic_problem",
    "is_reasoning_model",
    "openai_problem",
    "reply_limit",
    "thinking_budget",
]

MIN_THINKING_BUDGET = 1024
# The Messages API version that dropped the sampling parameters (SDKs send it by default).
SAMPLING_FREE_VERSION = "2026-10-21"
_THINKING_TYPES = ("enabled", "adaptive", "disabled", "between_tools")
_REASONING_NAME = re.compile(r"^(?:o\d+(?:$|-)|gpt-5(?!.*-chat))")
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


def is_reasoning_model(model: str) -> bool:
    """Whether the model name is an OpenAI reasoning model's (profile of o-series, gpt-5)."""
    return bool(_REASONING_NAME.match(model.rsplit("/", 1)[-1]))


def _positive_int(body: Mapping[str, Any], name: str) -> Problem | None:
    value = body.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return Problem(
        400, "invalid_request", f"Invalid '{name}': expected an integer of at least 1.",
        name, "invalid_value",
    )  # fmt: skip


def openai_problem(body: Mapping[str, Any], model: str) -> Problem | None:
    """What a chat completions request breaks for this model, if anything."""
    for name in ("max_tokens", "max_completion_tokens"):
        problem = _positive_int(body, name)
        if problem is not None:
            return problem
    if not is_reasoning_model(model):
        return None
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return Problem(
            400, "invalid_request",
            f"Unsupported value: 'temperature' does not support {temperature} with this "
            "model. Only the default (1) value is supported.",
            "temperature", "unsupported_value",
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
