"""Endpoint profiles of a judge: the API dialects, the kinds of endpoint, and the values a
judge leaves out take per profile (`schemas.judge.JudgeSpec` reads them)."""

from __future__ import annotations

from typing import Any, Literal

from schemas.decoding import ANTHROPIC_VERSION, NO_SAMPLING_VERSION, thinking_on

Provider = Literal["openai", "anthropic", "openai-responses"]

PromptCache = Literal["auto", "off", "1h"]
"""How a judge uses its provider's prompt cache across the K repeats of a prompt
(`tasks.judging.prompt_cache`): `auto` sends each prompt's first call before its repeats and
marks the prompt for the cache (OpenAI `prompt_cache_key`, Anthropic `cache_control` with the
default 5-minute lifetime); `1h` (Anthropic) does so with the 1-hour lifetime; `off` sends
nothing of the kind and the calls in any order."""
"""The API dialect a judge speaks: OpenAI chat completions, Anthropic Messages, or OpenAI's
Responses API."""

Profile = Literal[
    "openai",
    "azure",
    "openai_compatible",
    "anthropic",
    "openai-responses",
    "azure-responses",
    "gemini",
]
"""The kind of endpoint, which decides URLs, headers and default decoding fields:

- `openai`: the OpenAI platform's chat completions (`{base_url}/chat/completions`, bearer
  key); the plan's seed is sent; `reasoning: true` marks a reasoning model.
- `azure`: Azure OpenAI, either a deployment URL (`.../openai/deployments/D`, with an
  `api-version` query parameter) or the v1 API (`.../openai/v1`); the key goes in `api-key`.
  Defaults as for `openai`.
- `openai_compatible`: any other chat completions server (vLLM, Ollama, llama.cpp,
  OpenRouter, a LiteLLM route to another vendor; a LiteLLM route to OpenAI is `openai`);
  bearer key; no seed unless `seed` is set; no prompt-cache field.
- `anthropic`: the Messages API; `base_url` as the Anthropic SDK writes it
  (`https://api.anthropic.com`) or ending in `/v1`; key in `x-api-key`; never a seed.
- `openai-responses`: OpenAI's Responses API (`{base_url}/responses`, bearer key): the
  template's system text as `instructions`, `max_output_tokens`, `reasoning.effort`,
  `store: false` unless the judge sets `store: true`; no seed (the API has none). The pro
  and codex models are served only here.
- `azure-responses`: the Responses API of Azure OpenAI's v1 API (`.../openai/v1`, key in
  `api-key`).
- `gemini`: Google's OpenAI-compatible endpoint
  (`https://generativelanguage.googleapis.com/v1beta/openai/`), chat completions, bearer key;
  no seed unless `seed` is set.

Without `profile`, it is the provider's name; without `provider`, the profile's dialect.
"""

RESPONSES_PROFILES = ("openai-responses", "azure-responses")
"""The profiles that speak the Responses API (provider `openai-responses`)."""

Verdict = Literal["text", "json"]
"""How a judge gives its verdict: `text` in the template's own format, or `json`: a
structured verdict its API holds to a schema of the template's labels (`tasks.prompts.verdicts`)."""


def provider_of(profile: Any) -> str | None:
    """The dialect a profile implies (None: no profile, or one of the provider's name)."""
    if profile == "anthropic":
        return "anthropic"
    if profile in RESPONSES_PROFILES:
        return "openai-responses"
    if profile in ("azure", "openai_compatible", "gemini"):
        return "openai"
    return None


def profile_defaults(
    provider: str, profile: str, reasoning: bool, thinking: Any, version: str | None = None
) -> dict[str, Any]:
    """Judge-level values of the fields a judge leaves out, per profile (and, for Claude,
    per `anthropic_version`: from `NO_SAMPLING_VERSION` on, no temperature)."""
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    quiet = reasoning or (isinstance(thinking, dict) and thinking_on(thinking))
    no_sampling = provider == "anthropic" and (version or ANTHROPIC_VERSION) >= NO_SAMPLING_VERSION
    max_tokens = 1024
    if quiet:
        max_tokens = budget + 1024 if isinstance(budget, int) else 4096
    return {
        "profile": provider if provider in ("anthropic", "openai-responses") else "openai",
        "reasoning": False,
        "temperature": None if quiet or no_sampling else 0.0,
        "max_tokens": max_tokens,
        "seed": "plan" if profile in ("openai", "azure") else None,
        "system_role": None if provider == "anthropic" else "system",
        "anthropic_version": ANTHROPIC_VERSION if provider == "anthropic" else None,
        "anthropic_beta": [],
        "headers": {},
        "query": {},
        "simulated": False,
        "price": None,
        "batch": False,
        "prompt_cache": "auto",
        "verdict": "text",
        "store": False,
        "tokens_per_minute": None,
    }


TIMEOUT_FLOOR_S = 120.0
"""The shortest default timeout (the old fixed default): enough for a 1,024-token reply."""
TIMEOUT_BASE_S = 60.0
"""Queueing and the prompt, before the first output token."""
TIMEOUT_S_PER_TOKEN = 3600 / 128_000
"""Seconds per output token the Anthropic SDK itself allows a non-streaming request (an hour
for 128,000 tokens, `_calculate_nonstreaming_timeout`): 16,000 tokens wait 60 + 450 s."""
TIMEOUT_UNBOUNDED_S = 600.0
"""A request with no `max_tokens`: the OpenAI and Anthropic SDKs' default, 10 minutes."""

NEW_FIELDS = frozenset(
    {"profile", "reasoning", "seed", "stop", "response_format", "reasoning_effort", "thinking",
     "system_role", "anthropic_version", "anthropic_beta", "headers", "query", "simulated",
     "price", "batch", "prompt_cache", "verdict", "store", "tokens_per_minute"}
)  # fmt: skip
"""Fields a judge dump holds only when they differ from the profile's default (the dumps of
earlier runs have none of them)."""
