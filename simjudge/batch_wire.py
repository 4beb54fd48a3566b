"""The batch APIs' wire formats in the simulated judge: their limits, what each refuses,
and the lines of OpenAI's output and error files."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from starlette.requests import Request

__all__ = [
    "BatchJob",
    "anthropic_view",
    "openai_view",
    "ANTHROPIC_MAX_BYTES",
    "ANTHROPIC_MAX_REQUESTS",
    "OPENAI_ENDPOINTS",
    "OPENAI_MAX_BYTES",
    "OPENAI_MAX_REQUESTS",
    "anthropic_problem",
    "iso_time",
    "multipart_fields",
    "openai_problems",
    "openai_usage",
    "output_line",
    "unrun_line",
]

OPENAI_MAX_REQUESTS = 50_000
OPENAI_MAX_BYTES = 200 * 1024 * 1024
ANTHROPIC_MAX_REQUESTS = 100_000
ANTHROPIC_MAX_BYTES = 256 * 1024 * 1024
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def output_line(custom_id: str, status: int, body: Any) -> dict[str, Any]:
    response = {"status_code": status, "request_id": f"req_{uuid.uuid4().hex}", "body": body}
    return {
        "id": f"batch_req_{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": response,
        "error": None,
    }


def unrun_line(custom_id: str, code: str) -> dict[str, Any]:
    message = "This request could not be executed before the batch ended."
    return {
        "id": f"batch_req_{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }


OPENAI_ENDPOINTS = ("/v1/chat/completions", "/v1/responses")
"""The endpoints a simulated OpenAI batch runs (one per batch, as OpenAI's)."""


def openai_problems(
    lines: list[dict[str, Any]], size: int, endpoint: str = "/v1/chat/completions"
) -> list[dict[str, Any]]:
    """Why an input file cannot run as a batch (OpenAI's validation), as `errors.data`."""
    problems: list[dict[str, Any]] = []
    if len(lines) > OPENAI_MAX_REQUESTS or size > OPENAI_MAX_BYTES:
        problems.append(
            {
                "code": "too_many_requests",
                "line": None,
                "message": "a batch holds at most 50,000 requests and 200 MB",
            }
        )
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        custom_id = line.get("custom_id")
        if line.get("url") != endpoint or line.get("method") != "POST":
            problems.append(
                {
                    "code": "invalid_url",
                    "line": number,
                    "message": f"each line must POST to the batch's endpoint {endpoint}",
                }
            )
        if not isinstance(custom_id, str) or custom_id in seen:
            problems.append(
                {
                    "code": "duplicate_custom_id",
                    "line": number,
                    "message": f"custom_id {custom_id!r} is missing or repeated",
                }
            )
        seen.add(str(custom_id))
    return problems


def anthropic_problem(entries: Any, size: int) -> str | None:
    """Why a Message Batches request is refused (400), or None."""
    if not isinstance(entries, list) or not entries:
        return "requests: a non-empty list is required"
    if len(entries) > ANTHROPIC_MAX_REQUESTS or size > ANTHROPIC_MAX_BYTES:
        return "a message batch holds at most 100,000 requests and 256 MB"
    ids = [e.get("custom_id") if isinstance(e, dict) else None for e in entries]
    bad = next((i for i in ids if not isinstance(i, str) or not _CUSTOM_ID.match(i)), None)
    if bad is not None or any(not isinstance(e.get("params"), dict) for e in entries):
        return f"custom_id {bad!r} must match ^[a-zA-Z0-9_-]{{1,64}}$, each with params"
    if len(set(ids)) != len(ids):
        return "custom_id values must be unique within a batch"
    return None


def iso_time(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def multipart_fields(request: Request, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Fields of a multipart/form-data body: name -> (filename, bytes)."""
    head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        fields[str(name)] = (part.get_filename(), bytes(payload))
    return fields


@dataclass
class BatchJob:
    """One submitted batch: its requests (custom_id, body), and results once it ended."""

    api: str
    id: str
    requests: list[tuple[str, dict[str, Any]]]
    headers: dict[str, str]
    created: float
    meta: dict[str, Any]
    cancel_at: float | None = None
    results: dict[str, tuple[int, Any]] | None = None
    ended_at: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def openai_view(
    job: BatchJob, store: Callable[[list[dict[str, Any]]], str | None]
) -> dict[str, Any]:
    """The OpenAI Batch object of a job (its output and error files stored once it ended)."""
    ended = job.results is not None
    done = job.results or {}
    ok = sum(1 for status, _ in done.values() if status == 200)
    if job.meta.get("errors"):
        status = "failed"
    elif not ended:
        status = "cancelling" if job.cancel_at is not None else "in_progress"
    elif job.cancel_at is not None:
        status = "cancelled"
    else:
        status = "completed" if len(done) == len(job.requests) else "expired"
    output = [output_line(c, s, b) for c, (s, b) in done.items() if s == 200]
    errors = [output_line(c, s, b) for c, (s, b) in done.items() if s != 200]
    not_run = "batch_cancelled" if job.cancel_at is not None else "batch_expired"
    errors += [unrun_line(c, not_run) for c, _ in job.requests if c not in done]
    if ended and "output_file_id" not in job.meta:
        job.meta["output_file_id"] = store(output)
        job.meta["error_file_id"] = store(errors)
    stamp = int(job.ended_at) if job.ended_at else None
    return {
        "id": job.id,
        "object": "batch",
        "endpoint": job.meta.get("endpoint", "/v1/chat/completions"),
        "errors": {"object": "list", "data": job.meta["errors"]} if job.meta["errors"] else None,
        "input_file_id": job.meta["input_file_id"],
        "completion_window": "24h",
        "status": status,
        "output_file_id": job.meta.get("output_file_id"),
        "error_file_id": job.meta.get("error_file_id"),
        "created_at": int(job.created),
        "in_progress_at": int(job.created),
        "expires_at": int(job.created) + 86400,
        "completed_at": stamp if status == "completed" else None,
        "failed_at": stamp if status == "failed" else None,
        "expired_at": stamp if status == "expired" else None,
        "cancelling_at": int(job.cancel_at) if job.cancel_at else None,
        "cancelled_at": stamp if status == "cancelled" else None,
        "request_counts": {
            "total": len(job.requests),
            "completed": ok,
            "failed": len(errors) if ended else 0,
        },
        "metadata": job.meta.get("metadata"),
        "model": next((b.get("model") for _, b in job.requests if isinstance(b, dict)), None),
        "usage": openai_usage([line["response"]["body"] for line in output]),
    }


_USAGE_NAMES = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens",
                "prompt_tokens_details": "input_tokens_details",
                "completion_tokens_details": "output_tokens_details"}  # fmt: skip
"""Chat completions' usage names -> the Responses API's (and the Batch object's)."""


def openai_usage(bodies: list[Any]) -> dict[str, Any]:
    """A Batch object's `usage`: the tokens of its successful replies, summed (OpenAI's
    Batch object has carried it since September 2025), whichever endpoint's usage shape
    the replies have (chat completions' or the Responses API's)."""
    usages = [
        {_USAGE_NAMES.get(k, k): v for k, v in (b.get("usage") or {}).items()}
        for b in bodies
        if isinstance(b, dict)
    ]

    def total(part: str, detail: str | None = None) -> int:
        if detail is None:
            return sum(int(u.get(part) or 0) for u in usages)
        return sum(int((u.get(part) or {}).get(detail) or 0) for u in usages)

    prompt, completion = total("input_tokens"), total("output_tokens")
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": total("input_tokens_details", "cached_tokens")},
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": total("output_tokens_details", "reasoning_tokens")
        },
        "total_tokens": prompt + completion,
    }


def anthropic_view(job: BatchJob, request: Request) -> dict[str, Any]:
    """The Message Batch object of a job (`results_url` on the server the request reached)."""
    ended = job.results is not None
    done = job.results or {}
    counts = {
        "processing": 0 if ended else len(job.requests),
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    if ended:
        counts["succeeded"] = sum(1 for s, _ in done.values() if s == 200)
        counts["errored"] = len(done) - counts["succeeded"]
        unrun = "canceled" if job.cancel_at is not None else "expired"
        counts[unrun] = len(job.requests) - len(done)
    status = "ended" if ended else ("canceling" if job.cancel_at else "in_progress")
    root = f"{request.url.scheme}://{request.url.netloc}"
    return {
        "id": job.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": counts,
        "ended_at": iso_time(job.ended_at),
        "created_at": iso_time(job.created),
        "expires_at": iso_time(job.created + 86400),
        "archived_at": None,
        "cancel_initiated_at": iso_time(job.cancel_at),
        "results_url": f"{root}/v1/messages/batches/{job.id}/results" if ended else None,
    }
