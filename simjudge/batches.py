"""The simulated judge's batch APIs: OpenAI Batch (files, `/v1/batches`) and Anthropic
Message Batches (`/v1/messages/batches`), close enough that the official SDKs' `files.*`,
`batches.*` and `messages.batches.*` work against them.

Each request of a batch is answered by the judge's own handler (same personas, faults and
request log; the `custom_id` stands in for the call-key header), once the batch's
`BatchSettings.delay_s` has passed and it is next polled. `expire_after` answers only that
many requests of each batch and expires the rest; a cancelled batch answers none. Batch
submissions are logged too (path `/v1/batches` or `/v1/messages/batches`, `requests`), so a
test can count what was submitted.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from simjudge.batch_wire import (
    OPENAI_ENDPOINTS,
    BatchJob,
    anthropic_problem,
    anthropic_view,
    multipart_fields,
    openai_problems,
    openai_view,
)
from simjudge.failures import TruncatedResponse
from simjudge.limits import Api
from simjudge.wire import anthropic_error, openai_error


class Judge(Protocol):
    """What the batch endpoints use of the simulated judge (`simjudge.app.SimJudge`)."""

    def note(self, **entry: Any) -> None: ...

    async def respond(self, request: Request, api: Api, responses: bool = False) -> Response: ...

    def authorized(self, request: Request, api: Api) -> bool: ...


__all__ = ["BatchEndpoints", "BatchSettings", "Judge"]

_PASSED_HEADERS = ("authorization", "x-api-key", "api-key", "anthropic-version", "anthropic-beta")


@dataclass
class BatchSettings:
    """How the simulated batch APIs behave: seconds until a batch ends, and how many of each
    batch's requests are answered before it expires (None: all)."""

    delay_s: float = 0.0
    expire_after: int | None = None


class BatchEndpoints:
    """The batch routes of one `SimJudge`, with their files and batches."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.settings = BatchSettings()
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.jobs: dict[str, BatchJob] = {}

    def routes(self) -> list[Route]:
        return [
            Route("/v1/files", self._upload, methods=["POST"]),
            Route("/v1/files/{id}", self._file, methods=["GET"]),
            Route("/v1/files/{id}/content", self._content, methods=["GET"]),
            Route("/v1/batches", self._openai_create, methods=["POST"]),
            Route("/v1/batches", self._list, methods=["GET"]),
            Route("/v1/batches/{id}", self._retrieve, methods=["GET"]),
            Route("/v1/batches/{id}/cancel", self._cancel, methods=["POST"]),
            Route("/v1/messages/batches", self._anthropic_create, methods=["POST"]),
            Route("/v1/messages/batches", self._list, methods=["GET"]),
            Route("/v1/messages/batches/{id}", self._retrieve, methods=["GET"]),
            Route("/v1/messages/batches/{id}", self._delete, methods=["DELETE"]),
            Route("/v1/messages/batches/{id}/cancel", self._cancel, methods=["POST"]),
            Route("/v1/messages/batches/{id}/results", self._results, methods=["GET"]),
            Route("/_judgeline/batches", self._configure, methods=["POST"]),
        ]

    # --- shared ---------------------------------------------------------------------------

    @staticmethod
    def _api(request: Request) -> str:
        return "anthropic" if request.url.path.startswith("/v1/messages") else "openai"

    def _error(self, api: str, status: int, kind: str, message: str) -> Response:
        if api == "anthropic":
            return anthropic_error(status, kind, message)
        return openai_error(status, kind, message)

    def _refused(self, request: Request) -> Response | None:
        api = self._api(request)
        if self.judge.authorized(request, "anthropic" if api == "anthropic" else "openai"):
            return None
        return self._error(api, 401, "authentication", "invalid or missing API key")

    def _job(self, request: Request) -> BatchJob | Response:
        job = self.jobs.get(request.path_params["id"])
        api = self._api(request)
        if job is None or job.api != api:
            return self._error(api, 404, "not_found", f"no batch {request.path_params['id']}")
        return job

    def _submit(
        self,
        request: Request,
        api: str,
        requests: list[tuple[str, dict[str, Any]]],
        meta: dict[str, Any],
    ) -> BatchJob:
        prefix = "msgbatch_" if api == "anthropic" else "batch_"
        headers = {h: v for h in _PASSED_HEADERS if (v := request.headers.get(h)) is not None}
        job = BatchJob(api, prefix + uuid.uuid4().hex, requests, headers, time.time(), meta)
        self.jobs[job.id] = job
        self.judge.note(path=request.url.path, batch_id=job.id, requests=len(requests))
        return job

    async def _settle(self, job: BatchJob) -> None:
        """End the batch if its time has come: answer its requests (or not) once."""
        async with job.lock:
            now = time.time()
            if job.results is not None:
                return
            if job.cancel_at is not None:
                job.results, job.ended_at = {}, now
                return
            if now < job.created + self.settings.delay_s:
                return
            limit = self.settings.expire_after
            answered = job.requests if limit is None else job.requests[:limit]
            replies = await asyncio.gather(*(self._answer(job, cid, b) for cid, b in answered))
            job.results = dict(zip([cid for cid, _ in answered], replies, strict=True))
            job.ended_at = time.time()

    async def _answer(self, job: BatchJob, custom_id: str, body: dict[str, Any]) -> tuple[int, Any]:
        """(status, JSON body) the judge gives one request of the batch."""
        path = "/v1/messages" if job.api == "anthropic" else job.meta["endpoint"]
        # Encoded as httpx and the SDKs encode a direct request (compact JSON): replies are a
        # function of the body's bytes, so a batched call gets its direct reply.
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {**job.headers, "content-type": "application/json"}
        headers["x-judgeline-call-key"] = custom_id
        scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
            "server": ("127.0.0.1", 0),
            "scheme": "http",
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": raw, "more_body": False}

        api: Api = "anthropic" if job.api == "anthropic" else "openai"
        responses = path == "/v1/responses"
        response = await self.judge.respond(Request(scope, receive), api, responses)
        try:
            if isinstance(response, TruncatedResponse):
                raise ValueError("cut short")
            return response.status_code, json.loads(bytes(response.body))
        except ValueError:
            message = "the upstream reply was not valid JSON"
            failed = {"type": "error", "error": {"type": "api_error", "message": message}}
            return 500, failed

    # --- OpenAI: files --------------------------------------------------------------------

    async def _upload(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        fields = multipart_fields(request, await request.body())
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if "file" not in fields or not purpose:
            return openai_error(400, "invalid_request", "file and purpose are required")
        filename, data = fields["file"]
        file_id = self._add_file(data, filename or "upload.jsonl", purpose)
        return JSONResponse(self.files[file_id])

    async def _file(self, request: Request) -> Response:
        found = self.files.get(request.path_params["id"])
        if (refused := self._refused(request)) is not None or found is None:
            return refused or openai_error(404, "not_found", "No such File object")
        return JSONResponse(found)

    async def _content(self, request: Request) -> Response:
        data = self.contents.get(request.path_params["id"])
        if (refused := self._refused(request)) is not None or data is None:
            return refused or openai_error(404, "not_found", "No such File object")
        return Response(data, media_type="application/octet-stream")

    def _store(self, lines: list[dict[str, Any]]) -> str | None:
        if not lines:
            return None
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return self._add_file(data, "batch_output.jsonl", "batch_output")

    def _add_file(self, data: bytes, filename: str, purpose: str) -> str:
        """Keep `data` as a new file object; its id."""
        file_id = f"file-{uuid.uuid4().hex}"
        self.contents[file_id] = data
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        return file_id

    # --- OpenAI: batches ------------------------------------------------------------------

    async def _openai_create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        params = json.loads(await request.body())
        file_id = params.get("input_file_id")
        if file_id not in self.files or self.files[file_id]["purpose"] != "batch":
            return openai_error(400, "invalid_request", f"no batch input file {file_id!r}")
        endpoint = params.get("endpoint")
        if endpoint not in OPENAI_ENDPOINTS:
            return openai_error(
                400, "invalid_request", f"endpoint must be one of {', '.join(OPENAI_ENDPOINTS)}"
            )
        if params.get("completion_window") != "24h":
            return openai_error(400, "invalid_request", "completion_window must be 24h")
        data = self.contents[file_id]
        lines = [json.loads(t) for t in data.decode().splitlines() if t.strip()]
        errors = openai_problems(lines, len(data), endpoint)
        meta = {"input_file_id": file_id, "metadata": params.get("metadata"), "errors": errors,
                "endpoint": endpoint}  # fmt: skip
        requests = [] if errors else [(str(x["custom_id"]), x["body"]) for x in lines]
        job = self._submit(request, "openai", requests, meta)
        if errors:
            job.results, job.ended_at = {}, job.created
        return JSONResponse(openai_view(job, self._store))

    # --- Anthropic: message batches -------------------------------------------------------

    async def _anthropic_create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        raw = await request.body()
        entries = json.loads(raw).get("requests")
        problem = anthropic_problem(entries, len(raw))
        if problem is not None:
            return anthropic_error(400, "invalid_request", problem)
        requests = [(str(e["custom_id"]), e["params"]) for e in entries]
        job = self._submit(request, "anthropic", requests, {})
        return JSONResponse(anthropic_view(job, request))

    async def _results(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if isinstance(job, Response):
            return job
        await self._settle(job)
        if job.results is None:
            return anthropic_error(400, "invalid_request", "batch is still processing")
        unrun = {"type": "canceled" if job.cancel_at is not None else "expired"}
        lines = []
        for custom_id, _ in job.requests:
            if custom_id not in job.results:
                result: dict[str, Any] = unrun
            else:
                status, body = job.results[custom_id]
                ok = status == 200
                result = (
                    {"type": "succeeded", "message": body}
                    if ok
                    else {"type": "errored", "error": body}
                )
            lines.append(json.dumps({"custom_id": custom_id, "result": result}) + "\n")
        return Response("".join(lines).encode(), media_type="application/binary")

    async def _delete(self, request: Request) -> Response:
        job = self._job(request)
        if (refused := self._refused(request)) is not None or isinstance(job, Response):
            return refused or job  # type: ignore[return-value]
        if job.results is None:
            return anthropic_error(400, "invalid_request", "cancel the batch before deleting it")
        del self.jobs[job.id]
        return JSONResponse({"id": job.id, "type": "message_batch_deleted"})

    # --- both -----------------------------------------------------------------------------

    def _view(self, job: BatchJob, request: Request) -> dict[str, Any]:
        return (
            anthropic_view(job, request)
            if job.api == "anthropic"
            else openai_view(job, self._store)
        )

    async def _retrieve(self, request: Request) -> Response:
        job = self._job(request)
        if (refused := self._refused(request)) is not None or isinstance(job, Response):
            return refused or job  # type: ignore[return-value]
        await self._settle(job)
        return JSONResponse(self._view(job, request))

    async def _cancel(self, request: Request) -> Response:
        job = self._job(request)
        if (refused := self._refused(request)) is not None or isinstance(job, Response):
            return refused or job  # type: ignore[return-value]
        if job.results is None and job.cancel_at is None:
            job.cancel_at = time.time()
        return JSONResponse(self._view(job, request))

    async def _list(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        api = self._api(request)
        jobs = sorted((j for j in self.jobs.values() if j.api == api), key=lambda j: -j.created)
        after = request.query_params.get("after") or request.query_params.get("after_id")
        if after is not None:
            ids = [j.id for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        limit = int(request.query_params.get("limit", "20"))
        page = [self._view(j, request) for j in jobs[:limit]]
        first, last = (page[0]["id"], page[-1]["id"]) if page else (None, None)
        body = {"data": page, "has_more": len(jobs) > limit, "first_id": first, "last_id": last}
        return JSONResponse({"object": "list", **body} if api == "openai" else body)

    async def _configure(self, request: Request) -> Response:
        values = json.loads(await request.body())
        for name, value in values.items():
            if not hasattr(self.settings, name):
                return JSONResponse({"error": f"unknown batch setting {name!r}"}, 400)
            setattr(self.settings, name, value)
        return JSONResponse(vars(self.settings))
