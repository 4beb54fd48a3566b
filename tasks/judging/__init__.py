"""Judging: planned calls sent to judges over HTTP, every reply and attempt kept, none paid twice.

`planned` turns a plan into calls (rendered messages, call keys from `callkey`);
`endpoints` and `providers` build each API's request and read its reply, `prompt_cache`
adds what lets a vendor's prompt cache serve the K repeats of a prompt, `failures`
classifies what went wrong, `attempts` makes each try's log row; `client` sends with
pooling, limits, retries and a circuit breaker; `cache`, `journal` and `claims` store
replies crash-safely and keep two runs from paying for one call; `request`, `stage`,
`batches`, `tally` and `dask_batches` run the stage (locally or on Dask) and count it;
`stopping` ends it cleanly on SIGINT or SIGTERM.
"""

from tasks.judging.batches import Batch, Session, judge_batch, send_all, send_batch, split_batches
from tasks.judging.cache import (
    CacheWriter,
    compact,
    fold_dead_journals,
    read_attempts,
    read_replies,
    recover,
    stored_keys,
    write_attempts,
    write_replies,
)
from tasks.judging.callkey import (
    CALL_KEY_FORMAT,
    CallKeyer,
    call_key,
    call_key_from_digest,
    decoding_params,
    messages_sha256,
)
from tasks.judging.claims import CallClaims, Claim, RunLock, StoredKeyView
from tasks.judging.client import (
    CallRequest,
    CallResult,
    JudgeClient,
    aresolve_api_key,
    resolve_api_key,
)
from tasks.judging.dask_batches import (
    DASK_ADDRESS_ENV,
    RemoteBatch,
    judge_batch_remote,
    rebuild_calls,
    remote_batches,
)
from tasks.judging.endpoints import (
    Endpoint,
    anthropic_body,
    auth_headers,
    endpoint,
    extra_headers,
    openai_body,
)
from tasks.judging.failures import (
    DETAIL_LIMIT_BYTES,
    CallFailure,
    classify_status,
    error_message,
    retry_after,
    scrub,
)
from tasks.judging.journal import (
    DeadWriterWatch,
    Entry,
    JournalSegment,
    ReplyJournal,
    dead_segments,
)
from tasks.judging.pacing import (
    BREAKER_TRIP_AFTER,
    FATAL,
    RETRYABLE,
    THROTTLING,
    AdaptiveSlots,
    Breaker,
    BreakerTrip,
    RateLimiter,
    RetryPolicy,
)
from tasks.judging.planned import (
    PlannedCall,
    attempts_made,
    call_records,
    last_failures,
    plan_calls,
)
from tasks.judging.prompt_cache import (
    apply_prompt_cache,
    hit_tokens,
    min_cacheable_tokens,
    prompt_cache_key,
    write_tokens,
)
from tasks.judging.providers import (
    CALL_KEY_HEADER,
    PROVIDERS,
    AnthropicProvider,
    OpenAIProvider,
    Provider,
    Reply,
    register,
)
from tasks.judging.request import JudgeRequest, RemoteSender, StageHooks
from tasks.judging.stage import COMPACT_AT, call_status_counts, run_judge_stage, unstored_call_keys
from tasks.judging.stopping import GRACE_S, STOP_SIGNALS, StopRequest, stop_on_signals
from tasks.judging.tally import Tally

__all__ = [
    "stop_on_signals",
    "StopRequest",
    "STOP_SIGNALS",
    "GRACE_S",
    "AdaptiveSlots",
    "AnthropicProvider",
    "BREAKER_TRIP_AFTER",
    "Batch",
    "Breaker",
    "BreakerTrip",
    "CALL_KEY_FORMAT",
    "CALL_KEY_HEADER",
    "COMPACT_AT",
    "CacheWriter",
    "CallClaims",
    "CallFailure",
    "CallKeyer",
    "CallRequest",
    "CallResult",
    "Claim",
    "DASK_ADDRESS_ENV",
    "DETAIL_LIMIT_BYTES",
    "DeadWriterWatch",
    "Endpoint",
    "Entry",
    "FATAL",
    "JournalSegment",
    "JudgeClient",
    "JudgeRequest",
    "OpenAIProvider",
    "PROVIDERS",
    "PlannedCall",
    "Provider",
    "RETRYABLE",
    "RateLimiter",
    "RemoteBatch",
    "RemoteSender",
    "Reply",
    "ReplyJournal",
    "RetryPolicy",
    "RunLock",
    "Session",
    "StageHooks",
    "StoredKeyView",
    "THROTTLING",
    "Tally",
    "anthropic_body",
    "apply_prompt_cache",
    "aresolve_api_key",
    "attempts_made",
    "auth_headers",
    "call_key",
    "call_key_from_digest",
    "call_records",
    "call_status_counts",
    "classify_status",
    "compact",
    "dead_segments",
    "decoding_params",
    "endpoint",
    "error_message",
    "extra_headers",
    "fold_dead_journals",
    "hit_tokens",
    "judge_batch",
    "judge_batch_remote",
    "last_failures",
    "messages_sha256",
    "min_cacheable_tokens",
    "openai_body",
    "plan_calls",
    "prompt_cache_key",
    "read_attempts",
    "read_replies",
    "rebuild_calls",
    "recover",
    "register",
    "remote_batches",
    "resolve_api_key",
    "retry_after",
    "run_judge_stage",
    "scrub",
    "send_all",
    "send_batch",
    "split_batches",
    "stored_keys",
    "unstored_call_keys",
    "write_attempts",
    "write_replies",
    "write_tokens",
]
