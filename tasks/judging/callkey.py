"""The call key: the SHA-256 of everything that decides a judge's reply, defined in one place.

Providers read the decoding parameters from here (what is sent is what is keyed); the cache
stores replies under these keys and never decides what enters them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.decoding import ANTHROPIC_VERSION, ReasoningConfig
from schemas.judge import JudgeSpec
from tasks.hashing import canonical_json, sha256_text

__all__ = [
    "CALL_KEY_FORMAT",
    "CallKeyer",
    "call_key",
    "call_key_from_digest",
    "decoding_params",
    "messages_sha256",
]

CALL_KEY_FORMAT = "judgeline-call-v1"
"""First part of every call key's serialisation; bump it if what enters the key changes."""


def _max_tokens_name(spec: JudgeSpec) -> str:
    """The body field of the reply length limit: `max_completion_tokens` for OpenAI and Azure
    reasoning models, `max_output_tokens` for the Responses API, `max_tokens` for everything
    else."""
    if spec.provider == "openai-responses":
        return "max_output_tokens"
    if spec.reasoning and spec.profile in ("openai", "azure"):
        return "max_completion_tokens"
    return "max_tokens"


def _responses_format(value: Any) -> Any:
    """A chat completions `response_format` as the Responses API's `text.format` (a JSON
    schema's name, schema and strictness sit beside its type there)."""
    if isinstance(value, dict) and isinstance(value.get("json_schema"), dict):
        return {"type": value.get("type", "json_schema"), **value["json_schema"]}
    return value


def decoding_params(spec: JudgeSpec, config: ReasoningConfig, seed: int) -> dict[str, Any]:
    """The request parameters that decide a reply, in the order sent.

    The decoding fields present (the config's win, `None` is left out), the judge's `extra`,
    then the config's `extra`; `seed: plan` sends the planned call's `seed`. The Anthropic
    dialect drops any seed from the body (`tasks.judging.endpoints`), but not from the key.
    The Responses API takes `reasoning: {effort}` and `text: {format}` for `reasoning_effort`
    and `response_format`.
    """
    fields = spec.decoding(config)
    anthropic = spec.provider == "anthropic"
    responses = spec.provider == "openai-responses"
    params: dict[str, Any] = {}
    for name, value in fields.items():
        if value is None or name == "system_role":
            continue
        if name == "max_tokens":
            name = _max_tokens_name(spec)
        elif name == "seed" and value == "plan":
            value = seed
        elif name == "stop" and anthropic:
            name, value = "stop_sequences", [value] if isinstance(value, str) else value
        elif name == "reasoning_effort" and responses:
            name, value = "reasoning", {"effort": value}
        elif name == "response_format" and responses:
            name, value = "text", {"format": _responses_format(value)}
        params[name] = value
    params.update(spec.extra)
    params.update(config.extra)
    return params


def _key_params(spec: JudgeSpec, config: ReasoningConfig, seed: int) -> dict[str, Any]:
    """The decoding part of a call key: `decoding_params`; the planned call's seed when none
    is sent (as `unsent_seed`, or `seed` for Anthropic), so repeats stay distinct calls; and
    what reshapes the request: a system role other than `system`, an anthropic-version other
    than the default, anthropic-beta (header names cannot clash with body fields). For every
    judge configurable before these fields existed, this equals what the key held then."""
    params = decoding_params(spec, config, seed)
    if "seed" not in params:
        # The Messages API has no seed: its key has always held the plan's. A chat
        # completions request without one is another request than one with it.
        params["seed" if spec.provider == "anthropic" else "unsent_seed"] = seed
    role = spec.decoding(config)["system_role"]
    if role not in (None, "system"):
        params["system_role"] = role
    if spec.anthropic_version not in (None, ANTHROPIC_VERSION):
        params["anthropic-version"] = spec.anthropic_version
    if spec.anthropic_beta:
        params["anthropic-beta"] = list(spec.anthropic_beta)
    if spec.verdict != "text":
        # The schema sent is the template's (`tasks.prompts.verdicts`), which the key holds by hash.
        params["verdict"] = spec.verdict
    return params


def messages_sha256(messages: Sequence[dict[str, str]]) -> str:
    """SHA-256 of the rendered messages' canonical JSON."""
    return sha256_text(canonical_json(list(messages)))


class CallKeyer:
    """Call keys for one (judge, config): the definition of a call key, in one place.

    In: provider, model, `_key_params` (decoding fields as sent, the seed, request-shaping
    settings), repeat index, template id and hash, messages.
    Out: profile, base URL, extra headers and query parameters, timeouts, keys, concurrency,
    retries, judge and config names.
    The key is the SHA-256 of the canonical JSON of that list; the constant parts are
    serialised once, so planning 100,000 calls costs one small hash each.
    """

    def __init__(self, spec: JudgeSpec, config: ReasoningConfig, scope: str | None = None) -> None:
        self.spec = spec
        self.config = config
        # A scope (a drift probe's date) makes keys of its own: the same request asked again
        # in another scope is a new call. Unscoped keys are exactly as they always were.
        head = (CALL_KEY_FORMAT, spec.provider, spec.model)
        self._head = ",".join(canonical_json(v) for v in (*head, *([scope] if scope else [])))
        self._params: dict[int, str] = {}
        self._tails: dict[tuple[int, str, str], str] = {}

    def key(
        self, *, seed: int, repeat: int, template_id: str, template_hash: str, messages_digest: str
    ) -> str:
        params = self._params.get(seed)
        if params is None:
            params = canonical_json(_key_params(self.spec, self.config, seed))
            self._params[seed] = params
        tail = self._tails.get((repeat, template_id, template_hash))
        if tail is None:
            tail = ",".join(canonical_json(v) for v in (repeat, template_id, template_hash))
            self._tails[(repeat, template_id, template_hash)] = tail
        # Equal to digest(FORMAT, provider, model, params, repeat, template id, template
        # hash, messages digest): canonical JSON of a list is its items' JSON joined by ",".
        # A hex digest's JSON is itself in quotes; skip the encoder for the common case.
        plain = messages_digest.isascii() and messages_digest.isalnum()
        quoted = f'"{messages_digest}"' if plain else canonical_json(messages_digest)
        return sha256_text(f"[{self._head},{params},{tail},{quoted}]")


def call_key_from_digest(
    spec: JudgeSpec,
    config: ReasoningConfig,
    *,
    seed: int,
    repeat: int,
    template_id: str,
    template_hash: str,
    messages_digest: str,
) -> str:
    """The call key given the messages' SHA-256 (see `CallKeyer` for what enters it)."""
    return CallKeyer(spec, config).key(
        seed=seed,
        repeat=repeat,
        template_id=template_id,
        template_hash=template_hash,
        messages_digest=messages_digest,
    )


def call_key(
    spec: JudgeSpec,
    config: ReasoningConfig,
    *,
    seed: int,
    repeat: int,
    template_id: str,
    template_hash: str,
    messages: Sequence[dict[str, str]],
) -> str:
    """SHA-256 of what decides a judge's reply: the cache key of one call."""
    return call_key_from_digest(
        spec,
        config,
        seed=seed,
        repeat=repeat,
        template_id=template_id,
        template_hash=template_hash,
        messages_digest=messages_sha256(messages),
    )
