"""The simulated judge's batch APIs as the official `openai` and `anthropic` SDKs see them:
files, batches and message batches parse into the SDKs' types, through to the results."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.prompts.templates import render

KEY = "sk-batch-sdk-31"
PROMPT = render("arena-hard-v1", question="What is 6 x 7?", left="42", right="It is 41.")
MESSAGES: list[Any] = list(PROMPT.messages)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([Persona(name="strong", skill=0.9)], api_key=KEY) as srv:
        yield srv


def _settle(server: SimJudgeServer, delay: float) -> None:
    server.judge.batches.settings.delay_s = delay


def test_openai_sdk_uploads_runs_and_reads_a_batch(server: SimJudgeServer) -> None:
    _settle(server, 0.2)
    oai = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    lines = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "strong", "messages": MESSAGES, "seed": i}}
        for i in range(3)
    ]  # fmt: skip
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    uploaded = oai.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(data)
    batch = oai.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h",
        metadata={"run": "r1"},
    )  # fmt: skip
    assert batch.status == "in_progress" and batch.request_counts is not None
    assert batch.request_counts.total == 3 and batch.metadata == {"run": "r1"}
    time.sleep(0.3)
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id and done.error_file_id is None
    assert done.request_counts is not None and done.request_counts.completed == 3
    out = [json.loads(x) for x in oai.files.content(done.output_file_id).text.splitlines()]
    assert sorted(o["custom_id"] for o in out) == ["c0", "c1", "c2"]
    assert all(o["response"]["status_code"] == 200 for o in out)
    # The Batch object's `usage` (OpenAI's since September 2025): its replies' tokens.
    usages = [o["response"]["body"]["usage"] for o in out]
    assert done.usage is not None and done.model == "strong"
    assert done.usage.input_tokens == sum(u["prompt_tokens"] for u in usages) > 0
    assert done.usage.output_tokens == sum(u["completion_tokens"] for u in usages) > 0
    assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
    cached = sum((u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for u in usages)
    assert done.usage.input_tokens_details.cached_tokens == cached
    assert batch.id in [b.id for b in oai.batches.list()]


def test_a_responses_batch_reports_its_replies_usage(server: SimJudgeServer) -> None:
    """A Batch of `/v1/responses` lines reported zero usage: its replies' usage has the
    Responses shape (`input_tokens`, `output_tokens`), which the sum did not read."""
    _settle(server, 0.2)
    oai = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    lines = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/responses",
         "body": {"model": "strong", "instructions": MESSAGES[0]["content"],
                  "input": MESSAGES[1]["content"], "store": False}}
        for i in range(3)
    ]  # fmt: skip
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    uploaded = oai.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    batch = oai.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/responses", completion_window="24h"
    )
    time.sleep(0.3)
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    out = [json.loads(x) for x in oai.files.content(done.output_file_id).text.splitlines()]
    usages = [o["response"]["body"]["usage"] for o in out]
    assert done.usage is not None
    assert done.usage.input_tokens == sum(u["input_tokens"] for u in usages) > 0
    assert done.usage.output_tokens == sum(u["output_tokens"] for u in usages) > 0
    assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
    reasoning = sum(u["output_tokens_details"]["reasoning_tokens"] for u in usages)
    assert done.usage.output_tokens_details.reasoning_tokens == reasoning


def test_openai_sdk_cancels_a_batch(server: SimJudgeServer) -> None:
    _settle(server, 60)
    oai = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    line = {"custom_id": "c", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "strong", "messages": MESSAGES}}  # fmt: skip
    uploaded = oai.files.create(
        file=("in.jsonl", io.BytesIO((json.dumps(line) + "\n").encode())), purpose="batch"
    )
    batch = oai.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert oai.batches.cancel(batch.id).status == "cancelling"
    ended = oai.batches.retrieve(batch.id)
    assert ended.status == "cancelled" and ended.error_file_id
    error = json.loads(oai.files.content(ended.error_file_id).text)
    assert error["error"]["code"] == "batch_cancelled"


def test_anthropic_sdk_creates_polls_and_streams_results(server: SimJudgeServer) -> None:
    _settle(server, 0.2)
    claude = anthropic.Anthropic(
        base_url=server.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0
    )
    params: Any = {"model": "strong", "max_tokens": 200, "system": MESSAGES[0]["content"],
                   "messages": MESSAGES[1:]}  # fmt: skip
    batch = claude.messages.batches.create(
        requests=[{"custom_id": f"r-{i}", "params": params} for i in range(2)]
    )
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 2
    time.sleep(0.3)
    ended = claude.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.request_counts.succeeded == 2
    results = list(claude.messages.batches.results(batch.id))
    assert sorted(r.custom_id for r in results) == ["r-0", "r-1"]
    for r in results:
        assert r.result.type == "succeeded"
        assert "[[" in r.result.message.content[0].text  # type: ignore[union-attr]
    assert batch.id in [b.id for b in claude.messages.batches.list()]
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.batches.create(requests=[{"custom_id": "bad id!", "params": params}])
    _settle(server, 60)
    slow = claude.messages.batches.create(requests=[{"custom_id": "x", "params": params}])
    assert claude.messages.batches.cancel(slow.id).processing_status == "canceling"
    (only,) = list(claude.messages.batches.results(slow.id))
    assert only.result.type == "canceled"
    assert claude.messages.batches.delete(slow.id).type == "message_batch_deleted"


def test_serve_judge_flags_set_the_batch_delay_and_expiry() -> None:
    from simjudge.server import simjudge_subprocess

    flags = ("--persona", "strong", "--batch-delay-s", "0.5", "--batch-expire-after", "1")
    with simjudge_subprocess(*flags) as base_url:
        claude = anthropic.Anthropic(base_url=base_url.removesuffix("/v1"), api_key="k")
        params: Any = {"model": "strong", "max_tokens": 200, "system": MESSAGES[0]["content"],
                       "messages": MESSAGES[1:]}  # fmt: skip
        batch = claude.messages.batches.create(
            requests=[{"custom_id": f"r-{i}", "params": params} for i in range(3)]
        )
        assert claude.messages.batches.retrieve(batch.id).processing_status == "in_progress"
        time.sleep(0.7)
        ended = claude.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended"
        assert (ended.request_counts.succeeded, ended.request_counts.expired) == (1, 2)
