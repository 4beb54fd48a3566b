"""The simulated judge's failures: per-API error tables, injected fault replies, cut bodies."""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from simjudge.limits import Api
from simjudge.persona import Faults, rng_for
from simjudge.wire import anthropic_error, azure_error, openai_error

__all__ = [
    "ERRORS",
    "ID_HEADERS",
    "UNAUTHORIZED",
    "QuietTruncation",
    "TruncatedResponse",
    "fault_response",
]

ERRORS: dict[Api, Callable[..., Response]] = {
    "openai": openai_error, "azure": azure_error, "anthropic": anthropic_error,
}  # fmt: skip
ID_HEADERS: dict[Api, tuple[str, ...]] = {
    "openai": ("x-request-id",), "azure": ("x-request-id", "apim-request-id"),
    "anthropic": ("request-id",),
}  # fmt: skip
UNAUTHORIZED: dict[Api, tuple[str, str]] = {
    "openai": (
        "You didn't provide an API key. You need to provide your API key in an "
        "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        "Incorrect API key provided. You can find your API key in your account settings.",
    ),
    "azure": (
        "Access denied due to missing subscription key. Make sure to include subscription "
        "key when making requests to an API.",
        "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
        "provide a valid key for an active subscription and use a correct regional API "
        "endpoint for your resource.",
    ),
    "anthropic": ("x-api-key header is required", "invalid x-api-key"),
}
_QUOTA = {
    "openai": "You exceeded your current quota, please check your plan and billing details.",
    "anthropic": "Your credit balance is too low to access the Anthropic API. Please go to "
    "Plans & Billing to upgrade or purchase credits.",
}


class DeliberateTruncation(Exception):
    """Raised after sending a short body so the server drops the connection."""


class QuietTruncation(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DeliberateTruncation)


class TruncatedResponse(Response):
    """Announces a Content-Length, sends half of it, then aborts the connection."""

    def __init__(self, content: bytes) -> None:
        super().__init__(content, media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        headers.append((b"content-length", str(len(self.body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        cut = self.body[: len(self.body) // 2]
        await send({"type": "http.response.body", "body": cut, "more_body": True})
        raise DeliberateTruncation


def fault_response(
    fault: str | None, api: Api, err: Callable[..., Response], faults: Faults,
    digest: str, attempt: int,
) -> tuple[Response, float | None] | None:  # fmt: skip
    """The error reply of a failing fault and its Retry-After (None: no error reply)."""
    if fault == "rate_limited":
        response = err(429, "rate_limit", "Rate limit reached (simulated)")
        response.headers["retry-after"] = str(faults.retry_after_s)
        if api != "anthropic":
            response.headers["retry-after-ms"] = str(faults.retry_after_s * 1000)
        return response, float(faults.retry_after_s)
    if fault == "quota":
        if api == "anthropic":
            return err(400, "quota", _QUOTA["anthropic"]), None
        return err(429, "quota", _QUOTA["openai"]), None
    if fault == "overloaded":
        if api == "anthropic":
            return err(529, "overloaded", "Overloaded"), None
        return err(503, "overloaded", "The server is overloaded or not ready yet."), None
    if fault == "server_error":
        status = (500, 502, 503)[rng_for(digest, "status", str(attempt)).randrange(3)]
        return err(status, "server", f"simulated server error {status}"), None
    return None
