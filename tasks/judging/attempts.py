"""What one attempt leaves behind, as the direct and the batch paths record it: its attempts-log
row and, for a reply, the stored reply."""

from __future__ import annotations

import datetime as dt

from schemas.calls import AttemptRecord, ReplyRecord
from schemas.judge import JudgeSpec
from tasks.judging.failures import CallFailure
from tasks.judging.providers import Reply

__all__ = ["attempt_record", "reply_record"]


def attempt_record(
    outcome: Reply | CallFailure,
    call_key: str,
    run_id: str,
    attempt: int,
    started_at: dt.datetime,
    detail: str | None = None,
) -> AttemptRecord:
    """The attempts-log row of one attempt: a reply is ok with HTTP 200; a failure keeps its
    category and status, and `detail` (default: the failure's own)."""
    failure = outcome if isinstance(outcome, CallFailure) else None
    return AttemptRecord(
        call_key=call_key,
        run_id=run_id,
        attempt=attempt,
        ok=failure is None,
        error_category=failure.category if failure else None,
        http_status=failure.http_status if failure else 200,
        detail=(failure.detail if detail is None else detail) if failure else None,
        latency_ms=outcome.latency_ms,
        started_at=started_at,
    )


def reply_record(
    reply: Reply, call_key: str, spec: JudgeSpec, *, sent_in_batch: bool | None = None
) -> ReplyRecord:
    """The stored reply of a successful attempt, with every token count its usage reported
    (`sent_in_batch`: it came back from a provider batch)."""
    return ReplyRecord(
        call_key=call_key,
        provider=spec.provider,
        model=spec.model,
        raw_reply=reply.text,
        finish_reason=reply.finish_reason,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        latency_ms=reply.latency_ms,
        received_at=dt.datetime.now(dt.UTC),
        cached_prompt_tokens=reply.cached_prompt_tokens,
        reasoning_tokens=reply.reasoning_tokens,
        cache_write_tokens=reply.cache_write_tokens,
        cache_write_1h_tokens=reply.cache_write_1h_tokens,
        sent_in_batch=sent_in_batch,
    )
