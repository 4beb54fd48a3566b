"""Failed attempts: how an HTTP reply that is not a reply is classified, and what is kept of it.

`classify_status` turns a non-200 reply into a `CallFailure` (category, the provider's message,
how long the server asked us to wait); `scrub` keeps keys out of every detail string.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from schemas.vocabulary import ErrorCategory

__all__ = ["CallFailure", "classify_status", "retry_after", "scrub"]

_DETAIL_LIMIT = 200
_REFUSAL_MARKERS = ("content_filter", "content_policy", "refusal")


@dataclass(frozen=True)
class CallFailure:
    """A failed attempt, classified. `detail` is short and never holds a key."""

    category: ErrorCategory
    detail: str
    latency_ms: float
    http_status: int | None = None
    retry_after: float | None = None


def scrub(text: str, secret: str | None) -> str:
    """`text` cut to a short detail with any occurrence of `secret` masked."""
    if secret:
        text = text.replace(secret, "***")
    return text[:_DETAIL_LIMIT]


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds form; HTTP dates are rare here)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def classify_status(response: httpx.Response, ms: float, secret: str | None) -> CallFailure:
    """A non-200 reply as a failure: its category, a scrubbed detail, the wait it asked for."""
    status = response.status_code
    snippet = response.text[:120].replace("\n", " ")
    detail = scrub(f"HTTP {status}: {snippet}", secret)
    if status == 429:
        return CallFailure(
            "rate_limited", detail, ms, http_status=status, retry_after=retry_after(response)
        )
    if status == 408:
        return CallFailure("timeout", detail, ms, http_status=status)
    if status >= 500:
        return CallFailure(
            "server_error", detail, ms, http_status=status, retry_after=retry_after(response)
        )
    lowered = response.text.lower()
    if any(m in lowered for m in _REFUSAL_MARKERS):
        return CallFailure("refused", detail, ms, http_status=status)
    return CallFailure("client_error", detail, ms, http_status=status)
