"""Provider dialects: how one attempt is sent and its HTTP reply classified, per API.

One seam: `Provider.call(request) -> Reply | CallFailure` makes exactly one HTTP attempt.
Retries, limits and records are the client's job (`tasks.judging.client`). Providers register by
name in `PROVIDERS`; `openai` speaks chat completions, `anthropic` the Messages API,
`openai-responses` OpenAI's Responses API.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

import httpx

from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from schemas.vocabulary import ErrorCategory
from tasks.judging.endpoints import (
    anthropic_body,
    auth_headers,
    endpoint,
    openai_body,
    responses_body,
)
from tasks.judging.failures import CallFailure, classify_status, scrub
from tasks.judging.token_budget import remaining_tokens

__all__ = [
    "CALL_KEY_HEADER",
    "PROVIDERS",
    "AnthropicProvider",
    "CallFailure",
    "CallRequest",
    "OpenAIProvider",
    "Provider",
    "ResponsesProvider",
    "Reply",
    "register",
    "scrub",
]

CALL_KEY_HEADER = "X-Judgeline-Call-Key"
"""Carries the call key to the simulated judge (`JudgeSpec.simulated`), and nowhere else."""


@dataclass(frozen=True)
class CallRequest:
    """What one judge call sends: rendered messages plus the decoding seed and config."""

    call_key: str
    messages: tuple[dict[str, str], ...]
    seed: int
    config: ReasoningConfig
    attempts_before: int = 0
    """Attempts at this call key already in the attempts log: numbering continues after."""
    digest: str | None = None
    """SHA-256 of the messages (the plan's), for the prompt-cache fields; computed if None."""
    template_id: str | None = None
    """The template that rendered the messages (a `verdict: json` judge sends its schema);
    None: the one whose system text the messages carry."""


@dataclass(frozen=True)
class Reply:
    """A successful attempt: the reply text verbatim, with usage and latency.

    `finish_reason` is the provider's (`length` or `max_tokens`: cut by the token limit)."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    cached_prompt_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    remaining_tokens: int | None = None
    """Tokens the provider said were left of its per-minute limit (`token_budget`)."""


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _detail(usage: dict[str, Any], details: str, name: str) -> int | None:
    """`usage[details][name]` if it is an integer (OpenAI's usage details, Anthropic's
    `cache_creation`)."""
    part = usage.get(details)
    return _int_or_none(part.get(name)) if isinstance(part, dict) else None


def _sum_or_none(*values: Any) -> int | None:
    """The sum of the integers among `values`; None if the first is not one."""
    first = _int_or_none(values[0])
    if first is None:
        return None
    return first + sum(v for v in map(_int_or_none, values[1:]) if v is not None)


class Poster(Protocol):
    """What a provider sends with: an httpx client's `post` (`tasks.judging.shards`)."""

    async def post(
        self, url: httpx.URL | str, *, json: Any, headers: dict[str, str], timeout: httpx.Timeout
    ) -> httpx.Response: ...


class Provider(ABC):
    """One API dialect bound to one judge's pooled httpx clients and key."""

    name: ClassVar[str]

    def __init__(self, spec: JudgeSpec, http: Poster, api_key: str | None) -> None:
        self.spec = spec
        self.http = http
        self._key = api_key
        where = endpoint(spec)
        self.path = where.path
        """Request path, relative to the client's root (`tasks.judging.endpoints`)."""
        self.url = httpx.URL(where.url, params=where.params)
        """The full request URL with its query, parsed once: httpx parses a relative path
        and merges it with the client's root and query on every request otherwise."""
        self._timeouts: dict[int, tuple[ReasoningConfig, httpx.Timeout]] = {}

    def headers(self) -> dict[str, str]:
        """Authentication and version headers (the judge's own headers are the client's)."""
        return auth_headers(self.spec, self._key)

    build: ClassVar[Callable[..., dict[str, Any]]]
    """The API's body builder (`tasks.judging.endpoints`): spec, config, messages, seed,
    digest, template id."""

    def body(self, request: CallRequest) -> dict[str, Any]:
        """The JSON request body."""
        return type(self).build(
            self.spec,
            request.config,
            request.messages,
            request.seed,
            request.digest,
            request.template_id,
        )

    @abstractmethod
    def parse(self, data: Any, latency_ms: float) -> Reply | CallFailure:
        """Read a 200 reply's JSON; a refusal or a missing text is a failure.

        A reply cut by the token limit is a reply (it was paid for; sending it again buys
        the same cut): with no text at all, its text is "" and its finish reason says why.
        """

    def _fail(
        self, category: ErrorCategory, detail: str, latency_ms: float, **kw: Any
    ) -> CallFailure:
        return CallFailure(category, scrub(detail, self._key), latency_ms, **kw)

    async def call(self, request: CallRequest) -> Reply | CallFailure:
        """One HTTP attempt, classified, with the tokens the provider says are left."""
        headers = self.headers()
        if self.spec.simulated:
            headers[CALL_KEY_HEADER] = request.call_key
        started = time.perf_counter()
        try:
            response = await self.http.post(
                self.url,
                json=self.body(request),
                headers=headers,
                timeout=self._timeout(request.config),
            )
        except httpx.TimeoutException as exc:
            ms = (time.perf_counter() - started) * 1000
            return self._fail("timeout", f"{type(exc).__name__} after {ms:.0f} ms", ms)
        except httpx.TransportError as exc:
            ms = (time.perf_counter() - started) * 1000
            # A body cut short mid-transfer surfaces as a protocol error: the reply is
            # malformed, not a connection problem of ours.
            category: ErrorCategory = (
                "malformed_response"
                if isinstance(exc, httpx.RemoteProtocolError) and "message body" in str(exc)
                else "transport"
            )
            return self._fail(category, f"{type(exc).__name__}: {exc}", ms)
        except httpx.DecodingError as exc:
            ms = (time.perf_counter() - started) * 1000
            return self._fail("malformed_response", f"undecodable body: {exc}", ms)
        except httpx.RequestError as exc:
            ms = (time.perf_counter() - started) * 1000
            return self._fail("transport", f"{type(exc).__name__}: {exc}", ms)
        ms = (time.perf_counter() - started) * 1000
        left = remaining_tokens(response.headers)
        outcome = self._answer(response, ms)
        return outcome if left is None else replace(outcome, remaining_tokens=left)

    def _timeout(self, config: ReasoningConfig) -> httpx.Timeout:
        """The request timeout under `config`, worked out once per config (its decoding
        fields are read for it); the config is kept with it, so its id stays its own."""
        known = self._timeouts.get(id(config))
        if known is None or known[0] is not config:
            if len(self._timeouts) > 64:
                self._timeouts.clear()  # configs made per call (none today): stay small
            known = (config, httpx.Timeout(self.spec.request_timeout(config)))
            self._timeouts[id(config)] = known
        return known[1]

    def _answer(self, response: httpx.Response, ms: float) -> Reply | CallFailure:
        status = response.status_code
        if status != 200:
            return self._classify_status(response, ms)
        try:
            data = json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            return self._fail(
                "malformed_response", f"reply is not JSON: {exc}", ms, http_status=200
            )
        try:
            return self.parse(data, ms)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            return self._fail(
                "malformed_response",
                f"reply lacks {type(exc).__name__}: {exc}",
                ms,
                http_status=200,
            )

    def _classify_status(self, response: httpx.Response, ms: float) -> CallFailure:
        return classify_status(response, ms, self._key)


PROVIDERS: dict[str, type[Provider]] = {}
"""Provider classes by name (`JudgeSpec.provider`)."""


def register(name: str) -> Callable[[type[Provider]], type[Provider]]:
    """Class decorator: make a provider available under `name`."""

    def deco(cls: type[Provider]) -> type[Provider]:
        cls.name = name
        PROVIDERS[name] = cls
        return cls

    return deco


@register("openai")
class OpenAIProvider(Provider):
    """Chat completions (`POST {base_url}/chat/completions`): OpenAI, Azure OpenAI and
    OpenAI-compatible servers."""

    build = staticmethod(openai_body)

    def parse(self, data: Any, latency_ms: float) -> Reply | CallFailure:
        choice = data["choices"][0]
        message = choice["message"]
        finish = choice.get("finish_reason")
        if finish == "content_filter" or message.get("refusal"):
            why = message.get("refusal") or "finish_reason content_filter"
            return self._fail("refused", f"refused: {why}", latency_ms, http_status=200)
        content = message.get("content")
        if content is None and finish == "length":
            content = ""  # the token limit was spent before any text (reasoning): a paid reply
        if not isinstance(content, str):
            return self._fail(
                "malformed_response", "reply has no text content", latency_ms, http_status=200
            )
        usage = data.get("usage") or {}
        return Reply(
            text=content,
            finish_reason=finish,
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            latency_ms=latency_ms,
            cached_prompt_tokens=_detail(usage, "prompt_tokens_details", "cached_tokens"),
            reasoning_tokens=_detail(usage, "completion_tokens_details", "reasoning_tokens"),
            cache_write_tokens=_detail(usage, "prompt_tokens_details", "cache_write_tokens"),
        )


@register("anthropic")
class AnthropicProvider(Provider):
    """Anthropic Messages API (`POST {base_url}/v1/messages`): system prompt split out."""

    build = staticmethod(anthropic_body)

    def parse(self, data: Any, latency_ms: float) -> Reply | CallFailure:
        if data.get("type") == "error":
            return self._fail(
                "malformed_response", f"error object in a 200 reply: {data}", latency_ms
            )
        stop = data.get("stop_reason")
        if stop == "refusal":
            return self._fail("refused", "stop_reason refusal", latency_ms, http_status=200)
        blocks = data["content"]
        texts = [b["text"] for b in blocks if b.get("type") == "text"]
        if not texts and stop == "max_tokens":
            texts = [""]  # only a thinking block before the token limit: a paid reply
        if not texts or not all(isinstance(t, str) for t in texts):
            return self._fail(
                "malformed_response", "reply has no text block", latency_ms, http_status=200
            )
        usage = data.get("usage") or {}
        # input_tokens excludes cache reads and writes: prompt_tokens counts them all.
        cache_read = usage.get("cache_read_input_tokens")
        cache_write = usage.get("cache_creation_input_tokens")
        return Reply(
            text="".join(texts),
            finish_reason=stop,
            prompt_tokens=_sum_or_none(usage.get("input_tokens"), cache_read, cache_write),
            completion_tokens=_int_or_none(usage.get("output_tokens")),
            latency_ms=latency_ms,
            cached_prompt_tokens=_int_or_none(cache_read),
            cache_write_tokens=_int_or_none(cache_write),
            cache_write_1h_tokens=_detail(usage, "cache_creation", "ephemeral_1h_input_tokens"),
        )


@register("openai-responses")
class ResponsesProvider(Provider):
    """OpenAI's Responses API (`POST {base_url}/responses`): OpenAI and Azure OpenAI's v1 API.

    The reply is the text of the `message` items of `output` (`reasoning` items carry no
    text); a `refusal` content part is a refusal. `status: incomplete` with
    `incomplete_details.reason: max_output_tokens` is a reply cut by the limit (finish reason
    `max_output_tokens`), `content_filter` a refusal; `failed` a server error.
    """

    build = staticmethod(responses_body)

    def parse(self, data: Any, latency_ms: float) -> Reply | CallFailure:
        status = data.get("status")
        reason = (data.get("incomplete_details") or {}).get("reason")
        if status == "failed":
            error = data.get("error") or {}
            return self._fail(
                "server_error",
                f"response failed: {error.get('code')}: {error.get('message')}",
                latency_ms,
                http_status=200,
            )
        texts: list[str] = []
        refusals: list[str] = []
        for item in data["output"]:
            if item.get("type") != "message":
                continue
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part["text"])
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal")))
        if refusals or (status == "incomplete" and reason == "content_filter"):
            why = refusals[0] if refusals else "incomplete_details.reason content_filter"
            return self._fail("refused", f"refused: {why}", latency_ms, http_status=200)
        finish = reason if status == "incomplete" else status
        if not texts and finish == "max_output_tokens":
            texts = [""]  # the limit was spent on reasoning: a paid reply
        if not texts or not all(isinstance(t, str) for t in texts):
            return self._fail(
                "malformed_response", "reply has no output_text", latency_ms, http_status=200
            )
        usage = data.get("usage") or {}
        return Reply(
            text="".join(texts),
            finish_reason=finish,
            prompt_tokens=_int_or_none(usage.get("input_tokens")),
            completion_tokens=_int_or_none(usage.get("output_tokens")),
            latency_ms=latency_ms,
            cached_prompt_tokens=_detail(usage, "input_tokens_details", "cached_tokens"),
            reasoning_tokens=_detail(usage, "output_tokens_details", "reasoning_tokens"),
            cache_write_tokens=_detail(usage, "input_tokens_details", "cache_write_tokens"),
        )
