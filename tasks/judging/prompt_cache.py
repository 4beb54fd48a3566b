"""Provider prompt caching: what a request carries so the vendor's cache can hit across the K
repeats of a prompt, and what each vendor documents about its cache.

The K calls of one (presentation, judge, config) send the same prompt and differ only in
`seed` (or not at all): every vendor discounts a prompt prefix it has seen recently. A judge's
`prompt_cache` (`schemas.judge.PromptCache`) decides what its requests carry:

- OpenAI (profiles `openai`, `openai-responses`): caching is automatic from
  `OPENAI_MIN_TOKENS`; `auto` adds a `prompt_cache_key` derived from the presentation's
  rendered prompt, so the K repeats are routed to the machine that holds it, and for the
  models that take it (gpt-5.6 and later, `takes_cache_options`) `prompt_cache_options`
  with the implicit breakpoint and its 30-minute lifetime; those models report and bill the
  prompt tokens a call writes to the cache.
- Anthropic: only what a request marks is cached; `auto` puts one `cache_control` breakpoint
  (5-minute lifetime) on the last block of the prompt, `1h` one with the 1-hour lifetime.
  The whole prompt is the repeats' shared prefix (the Messages API has no seed). A batch
  judge's `auto` marks nothing (its repeats run together: each would pay a write, none
  read one).
- Azure and OpenAI-compatible servers get no field (their APIs may refuse one); they still
  get the order (`tasks.judging.batches`): first call, then its repeats.

None of these fields enters the call key (`tasks.judging.callkey` builds it from the decoding
parameters alone): a reply stays reusable whatever the caching setting. The vendor facts
below are as read on `AS_OF` (README: "Provider prompt caching").
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from schemas.judge import JudgeSpec
from tasks.prompts.profiles import takes_cache_options

__all__ = [
    "ANTHROPIC_DEFAULT_MIN_TOKENS",
    "ANTHROPIC_MIN_TOKENS",
    "AS_OF",
    "OPENAI_INCREMENT",
    "OPENAI_MIN_TOKENS",
    "apply_prompt_cache",
    "cache_breakpoint",
    "OPENAI_CACHE_OPTIONS",
    "caches",
    "hit_tokens",
    "min_cacheable_tokens",
    "ordered",
    "prompt_cache_key",
    "takes_cache_options",
    "write_tokens",
]

AS_OF = dt.date(2026, 12, 1)
"""The date the vendor facts below were read."""

OPENAI_MIN_TOKENS = 1024
"""OpenAI caches prompts of 1,024 tokens or more (prompt caching guide)."""
OPENAI_INCREMENT = 128
"""OpenAI's cache hits grow in steps of 128 tokens past the first 1,024 (prompt caching
guide: cached tokens read 1,024, 1,152, 1,280, ...)."""

ANTHROPIC_MIN_TOKENS: dict[str, int] = {
    "claude-fable-5-1": 512,
    "claude-mythos-5-1": 512,
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-opus-4-8": 1024,
    "claude-opus-4-7": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-5": 1024,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-haiku-4-5": 4096,
    "claude-haiku-3-5": 2048,
}
"""Anthropic's minimum cacheable prompt length per model (prompt caching docs, "Cache
limitations"): a shorter prefix is not cached, and no error says so. A dated snapshot name
takes its model's entry (the longest name it starts with)."""
ANTHROPIC_DEFAULT_MIN_TOKENS = 1024
"""The minimum assumed for a Claude model the table does not list (and the simulated
judge's)."""

_KEY_PREFIX = "judgeline-"

OPENAI_CACHE_OPTIONS = {"mode": "implicit", "ttl": "30m"}
"""`prompt_cache_options` of an OpenAI judge whose model takes them: OpenAI's one implicit
breakpoint at the end of the prompt (the K repeats share all of it) and the lifetime it
keeps at least (`30m`, the only value the API takes today)."""


def caches(spec: JudgeSpec) -> bool:
    """Whether the judge marks its requests for the provider's prompt cache.

    Not an Anthropic batch judge's under `auto`: a batch's requests run together, so each
    writes the prompt (billed, at 1.25x or 2x the input price) and none reads another's
    (measured: 80 of 80 batch replies wrote, none read). `1h` still marks them, as asked;
    the estimate then counts a write per call.
    """
    vendor = spec.profile in ("openai", "openai-responses", "anthropic")
    if spec.prompt_cache == "off" or not vendor:
        return False
    return not (spec.batch and spec.provider == "anthropic" and spec.prompt_cache == "auto")


def ordered(spec: JudgeSpec) -> bool:
    """Whether the judge's repeats wait for the first call of their prompt (every judge whose
    prompt cache is not `off`: servers without a cache field may still cache prefixes)."""
    return spec.prompt_cache != "off"


def prompt_cache_key(messages_sha256: str) -> str:
    """OpenAI's `prompt_cache_key` of a rendered prompt: the same for its K repeats (and for
    every judge config that sends it), 50 characters, no text of the prompt."""
    return _KEY_PREFIX + messages_sha256[:40]


def cache_breakpoint(spec: JudgeSpec) -> dict[str, str]:
    """The Anthropic `cache_control` of a judge's breakpoint."""
    ttl = {"ttl": "1h"} if spec.prompt_cache == "1h" else {}
    return {"type": "ephemeral", **ttl}


def apply_prompt_cache(spec: JudgeSpec, body: dict[str, Any], messages_sha256: str) -> None:
    """Add the judge's caching fields to a request body (in place; never a keyed field).

    A field the judge's `extra` already sets is left as it is.
    """
    if not caches(spec):
        return
    if spec.provider == "anthropic":
        messages = body["messages"]
        if messages and "cache_control" not in body and isinstance(messages[-1]["content"], str):
            last = messages[-1]
            mark = cache_breakpoint(spec)
            block = {"type": "text", "text": last["content"], "cache_control": mark}
            body["messages"] = [*messages[:-1], {**last, "content": [block]}]
    else:
        if "prompt_cache_key" not in body:
            body["prompt_cache_key"] = prompt_cache_key(messages_sha256)
        if takes_cache_options(spec.model) and "prompt_cache_options" not in body:
            body["prompt_cache_options"] = dict(OPENAI_CACHE_OPTIONS)


def min_cacheable_tokens(spec: JudgeSpec) -> int | None:
    """The shortest prompt the judge's provider caches (None: the judge does not cache)."""
    if not caches(spec):
        return None
    if spec.provider != "anthropic":
        return OPENAI_MIN_TOKENS
    stems = [m for m in ANTHROPIC_MIN_TOKENS if spec.model.startswith(m)]
    return ANTHROPIC_MIN_TOKENS[max(stems, key=len)] if stems else ANTHROPIC_DEFAULT_MIN_TOKENS


def hit_tokens(spec: JudgeSpec, prompt_tokens: int) -> int:
    """Prompt tokens a repeat reads from the cache once the first call of its prompt stored it
    (0: too short, or the judge does not cache): OpenAI's in whole steps of 128, Anthropic's
    the whole prompt (its breakpoint is the prompt's last block)."""
    least = min_cacheable_tokens(spec)
    if least is None or prompt_tokens < least:
        return 0
    if spec.provider == "anthropic":
        return prompt_tokens
    return least + (prompt_tokens - least) // OPENAI_INCREMENT * OPENAI_INCREMENT


def write_tokens(spec: JudgeSpec, prompt_tokens: int) -> int:
    """Prompt tokens the first call of a prompt writes to a cache that bills writes apart
    (Anthropic: the marked prefix, if long enough; OpenAI from gpt-5.6 on: the prefix its
    repeats read; earlier OpenAI models bill none)."""
    billed = spec.provider == "anthropic" or takes_cache_options(spec.model)
    return hit_tokens(spec, prompt_tokens) if billed else 0
