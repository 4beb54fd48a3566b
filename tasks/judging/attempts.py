"""The attempts log's row of one attempt, as the direct and the batch paths record it."""

from __future__ import annotations

import datetime as dt

from schemas.calls import AttemptRecord
from tasks.judging.failures import CallFailure
from tasks.judging.providers import Reply

__all__ = ["attempt_record"]


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
