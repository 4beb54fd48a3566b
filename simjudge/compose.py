"""Reply bodies within the request's token limit: reasoning tokens, thinking, truncation.

A token is four characters of reply text (plus one per reply), as the judge has always
counted. OpenAI reasoning models spend reasoning tokens by effort before the visible reply,
all within `max_completion_tokens`. With Anthropic extended thinking the judge thinks for
its whole budget and a little past it (the budget is a target, not a hard cap; adaptive
thinking takes a fixed amount), then writes its reply within `max_tokens`; with
`display: "omitted"` the thinking block keeps only its signature. A reply that does not
fit is cut at the limit and ends with `finish_reason: "length"` /
`stop_reason: "max_tokens"`; a limit used up by reasoning leaves empty content, or a
Messages reply holding only its thinking block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simjudge.caching import CacheUse
from simjudge.rules import reply_limit, thinking_budget
from simjudge.wire import anthropic_reply, openai_reply

__all__ = [
    "ADAPTIVE_THINKING",
    "REASONING_TOKENS",
    "THINKING_OVERRUN",
    "anthropic_payload",
    "asks_for_schema",
    "openai_payload",
]

REASONING_TOKENS = {"none": 0, "minimal": 16, "low": 64, "medium": 256, "high": 768,
                    "xhigh": 1536, "max": 3072}  # fmt: skip
THINKING_OVERRUN = 32
ADAPTIVE_THINKING = 256
_THOUGHTS = (
    "The question has one correct result. I check each answer's result and its steps, "
    "then weigh completeness and clarity.",
    "I compare the two answers against the question: first correctness, then whether "
    "each follows the instructions.",
)


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


def openai_payload(
    digest: str, model: str, text: str, prompt_tokens: int, body: Mapping[str, Any],
    *, reasoning: bool, effort: str | None, cache: CacheUse | None = None,
    reports_writes: bool = False, refusal: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A chat completion of `text` within the request's limit (reasoning models reason first);
    `reports_writes`: the model reports the prompt tokens it wrote to the cache (gpt-5.6 and
    later); a `refusal` is said instead of `text`."""
    if refusal is not None:
        text = refusal
    spent = REASONING_TOKENS.get(effort or "medium", REASONING_TOKENS["medium"]) if reasoning else 0
    tokens, finish = _tokens(text), "stop"
    limit = reply_limit(body)
    if limit is not None and spent + tokens > limit:
        spent = min(spent, limit)
        tokens = limit - spent
        text, finish = text[: tokens * 4], "length"
    written = (cache.openai_write if cache else 0) if reports_writes else None
    return openai_reply(
        digest, model, text, (prompt_tokens, spent + tokens), finish,
        spent if reasoning else None, cache.read if cache else 0, written,
        text if refusal is not None else None,
    )  # fmt: skip


def anthropic_payload(
    digest: str, model: str, text: str, prompt_tokens: int, body: Mapping[str, Any],
    cache: CacheUse | None = None, refusal: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A Messages reply of `text` within `max_tokens`, after a thinking block if enabled; a
    `refusal` ends it with `stop_reason: refusal` and no text."""
    if refusal is not None:
        used = (cache.read, cache.write_5m, cache.write_1h) if cache else (0, 0, 0)
        return anthropic_reply(
            digest, model, None, (prompt_tokens, _tokens(refusal)), "refusal", None, used
        )
    budget = thinking_budget(body)
    limit = reply_limit(body)
    thought = None if budget is None else _THOUGHTS[int(digest[1], 16) % len(_THOUGHTS)]
    if thought is not None and body["thinking"].get("display") == "omitted":
        thought = ""
    spent = 0
    if budget is not None:
        spent = ADAPTIVE_THINKING if budget == "adaptive" else int(budget) + THINKING_OVERRUN
    tokens, stop = _tokens(text), "end_turn"
    reply: str | None = text
    if limit is not None and spent + tokens > limit:
        stop = "max_tokens"
        if spent >= limit:
            spent, tokens, reply = limit, 0, None
        else:
            tokens = limit - spent
            reply = text[: tokens * 4]
    used = (cache.read, cache.write_5m, cache.write_1h) if cache else (0, 0, 0)
    return anthropic_reply(
        digest, model, reply, (prompt_tokens, spent + tokens), stop, thought, used
    )


def asks_for_schema(body: Mapping[str, Any]) -> bool:
    """Whether a (chat or Messages) request holds its reply to a JSON schema: the judge then
    answers with the structured verdict (`tasks.prompts.verdicts`)."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return True
    config = body.get("output_config") or body.get("output_format")
    if isinstance(config, dict) and "format" in config:
        config = config["format"]
    return isinstance(config, dict) and config.get("type") == "json_schema"
