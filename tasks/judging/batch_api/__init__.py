"""Provider batch APIs: a judge with `batch: true` has its calls sent as OpenAI Batch jobs or
Anthropic Message Batches (half price, within 24 h) instead of one request each.

`api` is what both APIs offer (`openai`, `anthropic`); `journal` records each batch before
it is submitted, so a killed run polls what it already paid for; `sender` plugs into the
judge stage as `StageHooks.sender` and stores results in the same cache as direct replies.
"""

from tasks.judging.batch_api.anthropic import AnthropicBatches
from tasks.judging.batch_api.api import BatchApi, BatchApiError, BatchStatus, Outcome
from tasks.judging.batch_api.journal import BatchEntry, BatchJournal, EntryState
from tasks.judging.batch_api.openai import OpenAIBatches
from tasks.judging.batch_api.sender import (
    PollSchedule,
    ProviderBatch,
    await_batch,
    batch_api,
    batch_sender,
    split_lines,
)

__all__ = [
    "AnthropicBatches",
    "BatchApi",
    "BatchApiError",
    "BatchEntry",
    "BatchJournal",
    "BatchStatus",
    "EntryState",
    "OpenAIBatches",
    "Outcome",
    "PollSchedule",
    "ProviderBatch",
    "await_batch",
    "batch_api",
    "batch_sender",
    "split_lines",
]
