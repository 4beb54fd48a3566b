"""Anthropic Message Batches: `/v1/messages/batches`, polled, results streamed as JSONL.

Limits per batch: 100,000 requests or 256 MB. Each request is `{"custom_id", "params"}`
(custom_id: 1 to 64 of `[A-Za-z0-9_-]`; a call key is 64 hex digits); each result line is
`{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"} |
{"type": "canceled"} | {"type": "expired"}}`, read from the batch's `results_url`.
"""

from __future__ import annotations

import json
from typing import Any

from schemas.vocabulary import ErrorCategory
from tasks.judging.batch_api.api import BatchApi, BatchApiError, BatchStatus, Outcome
from tasks.judging.failures import CallFailure, classify_status
from tasks.judging.planned import PlannedCall

__all__ = ["AnthropicBatches"]

_STATUS_OF = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicBatches(BatchApi):
    """Anthropic's Message Batches API for one judge (`base_url` as for messages)."""

    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    @property
    def _path(self) -> str:
        return self.provider.path + "/batches"

    def line(self, call: PlannedCall) -> dict[str, Any]:
        return {"custom_id": call.call_key, "params": self.provider.body(call.request())}

    async def submit(self, local_id: str, lines: list[dict[str, Any]]) -> str:
        batch = await self._json("POST", self._path, json={"requests": lines})
        return str(batch["id"])

    async def find(self, local_id: str) -> str | None:
        return None  # a Message Batch carries no metadata to find it by

    async def poll(self, batch_id: str) -> BatchStatus:
        batch = await self._json("GET", f"{self._path}/{batch_id}")
        status = str(batch["processing_status"])
        return BatchStatus(status, status == "ended", dict(batch.get("request_counts") or {}))

    async def results(self, batch_id: str, latency_ms: float) -> dict[str, Outcome]:
        batch = await self._json("GET", f"{self._path}/{batch_id}")
        url = batch.get("results_url")
        if not url:
            detail = f"message batch {batch_id} ended without a results_url"
            raise BatchApiError(CallFailure("malformed_response", detail, latency_ms))
        out: dict[str, Outcome] = {}
        async with self.http.stream("GET", url) as response:
            if response.status_code != 200:
                await response.aread()
                raise BatchApiError(classify_status(response, 0.0, self._key))
            async for text in response.aiter_lines():
                if text.strip():
                    line = json.loads(text)
                    out[str(line["custom_id"])] = self._outcome(line["result"], latency_ms)
        return out

    def _outcome(self, result: dict[str, Any], ms: float) -> Outcome:
        kind = result.get("type")
        if kind == "succeeded":
            return self._parse(result.get("message"), ms)
        if kind == "errored":
            body = result.get("error") or {}
            error_type = str((body.get("error") or {}).get("type"))
            return self._failure_of(_STATUS_OF.get(error_type, 500), body, None, ms)
        if kind in ("canceled", "expired"):
            category: ErrorCategory = "cancelled" if kind == "canceled" else "expired"
            return CallFailure(category, f"message batch request {kind}", ms)
        return CallFailure("malformed_response", f"unknown result type {kind!r}", ms)

    async def cancel(self, batch_id: str) -> None:
        await self._json("POST", f"{self._path}/{batch_id}/cancel")
