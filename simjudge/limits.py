"""Request ids and rate-limit headers, as OpenAI, Azure OpenAI and Anthropic send them.

The simulated judge counts requests and tokens per API in one-minute windows against
fixed limits; the counts only feed the headers (rate-limit faults are injected by
personas). A rate-limited reply shows no requests remaining until its Retry-After.

With a tokens-per-minute limit (`TokenBucket`) the judge enforces it as the vendors do: a
request counts its prompt and its reply limit on arrival against a bucket of that capacity
refilled continuously; one that does not fit is answered 429 with the seconds until it
would; the unused part of the reply limit is given back once answered. Its token headers
(both vendors') then say what the bucket holds.
"""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Literal

from starlette.responses import Response

__all__ = ["Api", "RateWindow", "TokenBucket", "request_id"]

Api = Literal["openai", "azure", "anthropic"]

REQUESTS_PER_MINUTE = 10_000
TOKENS_PER_MINUTE = 2_000_000
_WINDOW_S = 60.0


def request_id(api: Api) -> str:
    """A fresh request id in the API's style (`req_...`; Azure sends a UUID)."""
    if api == "azure":
        return str(uuid.uuid4())
    return f"req_{uuid.uuid4().hex}"


def _duration(seconds: float) -> str:
    """OpenAI's reset format: `1s`, `6m0s`, `120ms`."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    whole = int(round(seconds))
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class RateWindow:
    """Requests and tokens used per API in the current one-minute window."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start: dict[Api, float] = {}
        self._used: dict[Api, tuple[int, int]] = {}

    def charge(self, api: Api, tokens: int) -> tuple[int, int, float]:
        """Count one request of `tokens`; (requests used, tokens used, seconds to reset)."""
        now = time.monotonic()
        with self._lock:
            start = self._start.get(api)
            if start is None or now - start >= _WINDOW_S:
                start = self._start[api] = now
                self._used[api] = (0, 0)
            requests, used_tokens = self._used[api]
            self._used[api] = (requests + 1, used_tokens + tokens)
            return requests + 1, used_tokens + tokens, _WINDOW_S - (now - start)

    def headers(self, api: Api, tokens: int, limited_for: float | None) -> dict[str, str]:
        """The rate-limit headers of one reply (`limited_for`: seconds of a 429, else None)."""
        requests, used_tokens, reset = self.charge(api, tokens)
        remaining_requests = max(0, REQUESTS_PER_MINUTE - requests)
        remaining_tokens = max(0, TOKENS_PER_MINUTE - used_tokens)
        reset_requests = reset_tokens = reset
        if limited_for is not None:
            remaining_requests, reset_requests = 0, limited_for
        if api == "anthropic":
            return {
                "anthropic-ratelimit-requests-limit": str(REQUESTS_PER_MINUTE),
                "anthropic-ratelimit-requests-remaining": str(remaining_requests),
                "anthropic-ratelimit-requests-reset": _at(reset_requests),
                **_anthropic_tokens(TOKENS_PER_MINUTE, remaining_tokens, reset_tokens),
            }
        return {
            "x-ratelimit-limit-requests": str(REQUESTS_PER_MINUTE),
            "x-ratelimit-limit-tokens": str(TOKENS_PER_MINUTE),
            "x-ratelimit-remaining-requests": str(remaining_requests),
            "x-ratelimit-remaining-tokens": str(remaining_tokens),
            "x-ratelimit-reset-requests": _duration(reset_requests),
            "x-ratelimit-reset-tokens": _duration(reset_tokens),
        }


def _at(seconds: float) -> str:
    """An RFC 3339 UTC time `seconds` from now (Anthropic's reset headers)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return (now + dt.timedelta(seconds=round(seconds))).isoformat().replace("+00:00", "Z")


def _anthropic_tokens(limit: int, remaining: int, reset_s: float) -> dict[str, str]:
    """Anthropic's token headers: the same limit for all tokens, input and output tokens."""
    values = {"limit": str(limit), "remaining": str(remaining), "reset": _at(reset_s)}
    return {
        f"anthropic-ratelimit-{prefix}-{key}": value
        for prefix in ("tokens", "input-tokens", "output-tokens")
        for key, value in values.items()
    }


class TokenBucket:
    """A tokens-per-minute limit: capacity `tokens_per_minute`, refilled at that rate."""

    def __init__(self, tokens_per_minute: float) -> None:
        self.capacity = float(tokens_per_minute)
        self.rate = tokens_per_minute / 60.0
        self._level = self.capacity
        self._at = time.monotonic()
        self._lock = threading.Lock()
        self.refused = 0
        """Requests answered 429 for want of tokens."""

    def _refill(self) -> None:
        now = time.monotonic()
        self._level = min(self.capacity, self._level + (now - self._at) * self.rate)
        self._at = now

    def take(self, tokens: int) -> float | None:
        """Count a request of `tokens`: None if it fits, else the seconds until it would."""
        with self._lock:
            self._refill()
            need = min(float(tokens), self.capacity)
            if self._level >= need:
                self._level -= need
                return None
            self.refused += 1
            return (need - self._level) / self.rate

    def refusal(self, tokens: int, model: str, error: Callable[..., Response]) -> Response | None:
        """Count a request of `tokens`: None if it fits, else the API's 429 (`error`, the
        API's error body) saying when it would, in OpenAI's words, with Retry-After."""
        wait = self.take(tokens)
        if wait is None:
            return None
        limited = error(
            429, "rate_limit",
            f"Rate limit reached for {model} on tokens per min (TPM): Limit "
            f"{int(self.capacity)}, Requested {tokens}. Please try again in {wait:.3f}s.",
            code="rate_limit_exceeded",
        )  # fmt: skip
        limited.headers["retry-after"] = str(math.ceil(wait))
        limited.headers["retry-after-ms"] = str(math.ceil(wait * 1000))
        return limited

    def give(self, tokens: int) -> None:
        """Give back tokens a request counted and did not use."""
        with self._lock:
            self._refill()
            self._level = min(self.capacity, self._level + tokens)

    def headers(self, api: Api) -> dict[str, str]:
        """The token headers of a reply, as the API sends them."""
        with self._lock:
            self._refill()
            left, limit = int(self._level), int(self.capacity)
            reset = (self.capacity - self._level) / self.rate
        if api == "anthropic":
            return _anthropic_tokens(limit, left, reset)
        return {
            "x-ratelimit-limit-tokens": str(limit),
            "x-ratelimit-remaining-tokens": str(left),
            "x-ratelimit-reset-tokens": _duration(reset),
        }
