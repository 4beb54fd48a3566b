"""Failed attempts: how a reply that is not a reply is classified, and what is kept of it.

`classify_status` turns a non-200 HTTP reply into a `CallFailure`: a category that says
whether trying again can help, the provider's own message (whole, scrubbed of the key,
bounded at `DETAIL_LIMIT_BYTES`), and how long the server asked us to wait.

Categories of a non-200 reply, first match wins:

- `quota`: out of credit or over a spend limit or budget, whatever the status (400, 402,
  403, 429): error type or code `insufficient_quota`, `billing_error`, `budget_exceeded`,
  `enforced_spend_limit_reached`, or the message says so (OpenAI, Anthropic, OpenRouter,
  LiteLLM wordings in `_QUOTA_PHRASES`); every 402.
- `auth`: 401, 403 (a wrong, revoked or unentitled key), or a LiteLLM proxy without a
  database refusing a key that is not its master key (400 `no_db_connection`).
- `overloaded`: 529, or error type `overloaded_error` (Anthropic, busy for everyone; also
  when a gateway quotes it in its message: LiteLLM turns Anthropic's 529 into a 500).
- `rate_limited`: 429. `timeout`: 408. `server_error`: 5xx.
- `refused`: a content-policy refusal. `bad_request`: any other 4xx (400, 404, 422, ...):
  the request or the model name is wrong.

`auth`, `quota`, `bad_request` and `refused` never succeed when sent again; the client
retries only the others (`tasks.judging.client.RETRYABLE`).
"""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import functools
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

import httpx

from schemas.vocabulary import ErrorCategory

__all__ = [
    "DETAIL_LIMIT_BYTES",
    "CallFailure",
    "classify_status",
    "error_message",
    "retry_after",
    "scrub",
]

DETAIL_LIMIT_BYTES = 4096
"""Longest detail kept of one failed attempt (UTF-8 bytes): a provider's whole message fits."""

_REFUSAL_MARKERS = ("content_filter", "content_policy", "refusal")
_QUOTA_CODES = frozenset(
    {
        "insufficient_quota",  # OpenAI: out of credit or over the monthly budget (429)
        "billing_error",  # Anthropic (402)
        "enforced_spend_limit_reached",  # Anthropic: the tier's monthly spend limit (429)
        "budget_exceeded",  # LiteLLM proxy budgets
        "billing_hard_limit_reached",  # OpenAI
    }
)
_AUTH_CODES = frozenset(
    {
        "no_db_connection",  # LiteLLM proxy without a database: the key is not its master key
        "api_key_invalid",  # Google (Gemini): a wrong key is a 400 INVALID_ARGUMENT
    }
)
_QUOTA_PHRASES = (
    "exceeded your current quota",  # OpenAI
    "credit balance is too low",  # Anthropic
    "reached your specified api usage limits",  # Anthropic workspace spend limit (400)
    "spend limit",
    "insufficient credits",  # OpenRouter (402)
    "budget has been exceeded",  # LiteLLM
    "exceededbudget",  # LiteLLM
    "over budget",
    "max budget",
)
_RETRY_AFTER_HEADERS = ("", "llm_provider-")  # LiteLLM forwards the provider's headers prefixed
_REQUEST_ID_HEADERS = ("request-id", "x-request-id")


@dataclass(frozen=True)
class CallFailure:
    """A failed attempt, classified. `detail` holds the provider's message, never a key."""

    category: ErrorCategory
    detail: str
    latency_ms: float
    http_status: int | None = None
    retry_after: float | None = None
    """Seconds the server asked us to wait before sending again (a floor), if it said."""
    remaining_tokens: int | None = None
    """Tokens the provider said were left of its per-minute limit (`token_budget`)."""


_BASE64_CHAR = "[A-Za-z0-9+/_-]"


@functools.lru_cache(maxsize=16)
def _secret_pattern(secret: str) -> re.Pattern[str]:
    """Every form `secret` takes in an error text: as given, URL-encoded (either case of
    hex, `+` for a space), JSON-escaped (`\\/` too), and inside base64 (a Basic header's
    `user:key`, standard or URL-safe alphabet): the whole base64 word around it."""
    escaped = json.dumps(secret)[1:-1]
    forms = {secret, escaped, escaped.replace("/", "\\/")}
    forms |= {quote(secret, safe=""), quote(secret), quote_plus(secret)}
    parts = [
        # A percent-escape's hex digits in either case.
        re.sub(r"%([0-9A-F]{2})", r"%(?i:\1)", re.escape(form))
        for form in sorted(forms, key=len, reverse=True)
    ]
    raw = secret.encode("utf-8")
    for lead in range(3):
        # Base64 of bytes holding `raw` at an offset of `lead` (mod 3): the characters
        # made of its bits alone are the same whatever surrounds it.
        encoded = base64.b64encode(b"\0" * lead + raw).decode()
        core = encoded[-(-8 * lead // 6) : 8 * (lead + len(raw)) // 6]
        if len(core) >= 8:  # shorter runs turn up in unrelated base64
            for alphabet in (core, core.translate(str.maketrans("+/", "-_"))):
                parts.append(f"{_BASE64_CHAR}*{re.escape(alphabet)}{_BASE64_CHAR}*=*")
    return re.compile("|".join(parts))


def scrub(text: str, secret: str | None) -> str:
    """`text` with every form of `secret` masked (`_secret_pattern`), then cut to
    `DETAIL_LIMIT_BYTES`."""
    if secret:
        text = _secret_pattern(secret).sub("***", text)
    raw = text.encode("utf-8")
    if len(raw) <= DETAIL_LIMIT_BYTES:
        return text
    return raw[:DETAIL_LIMIT_BYTES].decode("utf-8", errors="ignore")


def _seconds(name: str, value: str, now: dt.datetime) -> float | None:
    """One Retry-After header value in seconds: milliseconds for `*-ms`, else seconds or an
    HTTP date."""
    value = value.strip()
    try:
        number = float(value)
    except ValueError:
        if name.endswith("-ms"):
            return None
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return max(0.0, (when - now).total_seconds())
    if number != number or number in (float("inf"), float("-inf")):
        return None
    return max(0.0, number / 1000 if name.endswith("-ms") else number)


def retry_after(headers: httpx.Headers, now: dt.datetime | None = None) -> float | None:
    """The longest wait any Retry-After header asks for, in seconds, or None.

    Read: `retry-after` (delta-seconds or HTTP date), `retry-after-ms` (OpenAI, Azure), and
    both as forwarded by a LiteLLM gateway (`llm_provider-retry-after`, ...). The longest
    wins: we never come back sooner than any of them asked.
    """
    now = now or dt.datetime.now(dt.UTC)
    waits = [
        wait
        for prefix in _RETRY_AFTER_HEADERS
        for name in (f"{prefix}retry-after", f"{prefix}retry-after-ms")
        if (value := headers.get(name)) is not None
        and (wait := _seconds(name, value, now)) is not None
    ]
    return max(waits) if waits else None


def _error_object(data: Any) -> dict[str, Any]:
    if isinstance(data, list) and len(data) == 1:
        data = data[0]  # Google's OpenAI-compatible endpoint wraps its error in a list
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            return error
        return data
    return {}


def error_message(body: str) -> str:
    """The provider's message in its own words: `error.message` of an OpenAI or Anthropic
    error body (or a plain `message`/`detail`/`error` string), else the body text."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()
    error = _error_object(data)
    for field in ("message", "detail", "error"):
        value = error.get(field)
        if isinstance(value, str) and value.strip():
            return value.strip()
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"]).strip()
    return body.strip()


def _quoted_error(message: str) -> Any:
    """The upstream error body a gateway quotes in its message (LiteLLM: `litellm.
    InternalServerError: AnthropicError - {"type":"error",...}`), or None."""
    start = message.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(message, start)[0]
    except ValueError:
        return None


def _codes_of(data: Any) -> set[str]:
    """An error body's type and code strings, lowercased (`error.type`, `error.code`,
    `error.status`, `error.details.error_code` or Google's `error.details[].reason`, a
    top-level `type`)."""
    error = _error_object(data)
    details = error.get("details")
    values = [error.get("type"), error.get("code"), error.get("status")]
    if isinstance(details, dict):
        values.append(details.get("error_code"))
    elif isinstance(details, list):  # Google: ErrorInfo entries with a `reason`
        values += [d.get("reason") for d in details if isinstance(d, dict)]
    if isinstance(data, dict) and data.get("type") != "error":
        values.append(data.get("type"))
    return {v.lower() for v in values if isinstance(v, str)}


def _error_codes(body: str, message: str) -> set[str]:
    """The type and code strings of the error body and of an upstream error its message
    quotes."""
    try:
        data = json.loads(body)
    except ValueError:
        return set()
    codes = _codes_of(data)
    quoted = _quoted_error(message)
    return codes | _codes_of(quoted) if isinstance(quoted, dict) else codes


def _category(status: int, body: str, message: str) -> ErrorCategory:
    codes = _error_codes(body, message)
    said = message.lower()
    quota = status == 402 or codes & _QUOTA_CODES or any(p in said for p in _QUOTA_PHRASES)
    if quota and status < 500:
        return "quota"
    if status in (401, 403) or (status < 500 and codes & _AUTH_CODES):
        return "auth"
    if status == 529 or "overloaded_error" in codes:
        return "overloaded"
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    if any(m in body.lower() for m in _REFUSAL_MARKERS):
        return "refused"
    return "bad_request"


def classify_status(response: httpx.Response, ms: float, secret: str | None) -> CallFailure:
    """A non-200 reply as a failure: its category, the provider's message and request id
    (scrubbed, bounded), and the wait it asked for."""
    status = response.status_code
    body = response.text
    message = error_message(body)
    request_id = next((v for h in _REQUEST_ID_HEADERS if (v := response.headers.get(h))), None)
    where = f" (request {request_id})" if request_id else ""
    return CallFailure(
        _category(status, body, message),
        scrub(f"HTTP {status}{where}: {message}", secret),
        ms,
        http_status=status,
        retry_after=retry_after(response.headers),
    )
