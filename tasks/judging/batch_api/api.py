"""What both provider batch APIs offer the batch sender: submit, poll, read results.

Each request line's body is the direct path's body (`Provider.body`, built by
`tasks.judging.endpoints`), and each result is read by the direct path's `Provider.parse`
or classified by `tasks.judging.failures.classify_status`: a reply stored from a batch is
the reply a direct call would have stored, under the same call key (the `custom_id`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from schemas.judge import JudgeSpec
from tasks.judging.endpoints import auth_headers, endpoint, extra_headers
from tasks.judging.failures import CallFailure, classify_status, scrub
from tasks.judging.planned import PlannedCall
from tasks.judging.providers import PROVIDERS, Provider, Reply

__all__ = ["BatchApi", "BatchApiError", "BatchStatus", "Outcome"]

Outcome = Reply | CallFailure
"""What became of one request of a batch."""


class BatchApiError(RuntimeError):
    """A batch endpoint refused a request (`failure` says why, classified)."""

    def __init__(self, failure: CallFailure) -> None:
        super().__init__(failure.detail)
        self.failure = failure


@dataclass(frozen=True)
class BatchStatus:
    """A batch as last polled: its provider status, whether it ended, and its counts."""

    status: str
    ended: bool
    counts: dict[str, int]


class BatchApi(ABC):
    """One judge's batch endpoint: a pooled httpx client, its key and its dialect."""

    max_requests: ClassVar[int]
    max_bytes: ClassVar[int]

    def __init__(self, spec: JudgeSpec, api_key: str | None) -> None:
        self.spec = spec
        self._key = api_key
        where = endpoint(spec)
        self.root = where.root
        self.http = httpx.AsyncClient(
            base_url=where.root,
            params=where.params,
            headers={**extra_headers(spec), **auth_headers(spec, api_key)},
            timeout=httpx.Timeout(max(spec.request_timeout(), 300.0)),
        )
        self.provider: Provider = PROVIDERS[spec.provider](spec, self.http, api_key)

    async def aclose(self) -> None:
        await self.http.aclose()

    @abstractmethod
    def line(self, call: PlannedCall) -> dict[str, Any]:
        """The batch's request entry for one call (custom_id: the call key)."""

    @abstractmethod
    async def submit(self, local_id: str, lines: list[dict[str, Any]]) -> str:
        """Send the batch; returns the provider's batch id."""

    @abstractmethod
    async def find(self, local_id: str) -> str | None:
        """The provider's id of a batch submitted under `local_id`, if it can tell."""

    @abstractmethod
    async def poll(self, batch_id: str) -> BatchStatus:
        """The batch's status now."""

    @abstractmethod
    async def results(self, batch_id: str, latency_ms: float) -> dict[str, Outcome]:
        """Each answered request's outcome by custom_id (an ended batch)."""

    @abstractmethod
    async def cancel(self, batch_id: str) -> None:
        """Ask the provider to cancel the batch."""

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        response = await self.http.request(method, path, **kw)
        if response.status_code != 200:
            raise BatchApiError(classify_status(response, 0.0, self._key))
        return response.json()

    def _failure_of(self, status: int, body: Any, request_id: str | None, ms: float) -> CallFailure:
        """A non-200 answer to one request of a batch, classified as the direct path does."""
        headers = {"x-request-id": request_id} if request_id else {}
        response = httpx.Response(status, content=json.dumps(body).encode(), headers=headers)
        return classify_status(response, ms, self._key)

    def _parse(self, body: Any, ms: float) -> Outcome:
        try:
            return self.provider.parse(body, ms)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            detail = scrub(f"reply lacks {type(exc).__name__}: {exc}", self._key)
            return CallFailure("malformed_response", detail, ms, http_status=200)
