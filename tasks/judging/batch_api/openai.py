"""The OpenAI Batch API: a JSONL file (purpose `batch`), `/v1/batches`, output and error files.

Limits per batch: 50,000 requests and a 200 MB input file. Each line is
`{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}` (`/v1/responses` for
a Responses API judge, the batch's endpoint); output and error
file lines are `{"id", "custom_id", "response": {"status_code", "request_id", "body"} | null,
"error": {"code", "message"} | null}`. A request the batch never ran has an error line coded
`batch_expired` or `batch_cancelled`.
"""

from __future__ import annotations

import json
from typing import Any

from schemas.vocabulary import ErrorCategory
from tasks.judging.batch_api.api import BatchApi, BatchApiError, BatchStatus, Outcome
from tasks.judging.failures import CallFailure, classify_status
from tasks.judging.planned import PlannedCall

__all__ = ["OpenAIBatches"]

_ENDED = {"completed", "failed", "expired", "cancelled"}
_NOT_RUN: dict[str, ErrorCategory] = {
    "batch_expired": "expired",
    "batch_cancelled": "cancelled",
    "request_timeout": "timeout",
}
CHAT_COMPLETIONS = "/v1/chat/completions"
RESPONSES = "/v1/responses"
METADATA_KEY = "judgeline_batch"


class OpenAIBatches(BatchApi):
    """OpenAI's Batch API for one judge (`base_url` as for chat completions)."""

    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    @property
    def endpoint(self) -> str:
        """The batch's endpoint: the judge's API."""
        return RESPONSES if self.provider.spec.provider == "openai-responses" else CHAT_COMPLETIONS

    def line(self, call: PlannedCall) -> dict[str, Any]:
        body = self.provider.body(call.request())
        return {"custom_id": call.call_key, "method": "POST", "url": self.endpoint, "body": body}

    async def submit(self, local_id: str, lines: list[dict[str, Any]]) -> str:
        data = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
        uploaded = await self._json(
            "POST",
            "files",
            data={"purpose": "batch"},
            files={"file": (f"{local_id}.jsonl", data, "application/jsonl")},
        )
        batch = await self._json(
            "POST",
            "batches",
            json={
                "input_file_id": uploaded["id"],
                "endpoint": self.endpoint,
                "completion_window": "24h",
                "metadata": {METADATA_KEY: local_id},
            },
        )
        return str(batch["id"])

    async def find(self, local_id: str) -> str | None:
        after: str | None = None
        while True:
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._json("GET", "batches", params=params)
            for batch in page["data"]:
                if (batch.get("metadata") or {}).get(METADATA_KEY) == local_id:
                    return str(batch["id"])
            if not page.get("has_more") or not page["data"]:
                return None
            after = page["data"][-1]["id"]

    async def poll(self, batch_id: str) -> BatchStatus:
        batch = await self._json("GET", f"batches/{batch_id}")
        status = str(batch["status"])
        return BatchStatus(status, status in _ENDED, dict(batch.get("request_counts") or {}))

    async def _lines(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        response = await self.http.get(f"files/{file_id}/content")
        if response.status_code != 200:
            raise BatchApiError(classify_status(response, 0.0, self._key))
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]

    async def results(self, batch_id: str, latency_ms: float) -> dict[str, Outcome]:
        batch = await self._json("GET", f"batches/{batch_id}")
        out: dict[str, Outcome] = {}
        lines = await self._lines(batch.get("output_file_id"))
        lines += await self._lines(batch.get("error_file_id"))
        for line in lines:
            out[str(line["custom_id"])] = self._outcome(line, latency_ms)
        return out

    def _outcome(self, line: dict[str, Any], ms: float) -> Outcome:
        response = line.get("response")
        if response and response.get("status_code") == 200:
            return self._parse(response.get("body"), ms)
        if response:
            return self._failure_of(
                int(response["status_code"]), response.get("body"), response.get("request_id"), ms
            )
        error = line.get("error") or {}
        code = str(error.get("code"))
        detail = f"{code}: {error.get('message')}"
        category: ErrorCategory = _NOT_RUN.get(code, "server_error")
        return CallFailure(category, detail, ms)

    async def cancel(self, batch_id: str) -> None:
        await self._json("POST", f"batches/{batch_id}/cancel")
