"""Calls of the demo's full grid sent directly and as provider batches: a table.

Usage: python bench/batch_calls.py [--pairs 150] [--k 4]

Runs the judge stage twice on the demo benchmark (three personas x two reasoning configs,
full grid) against the simulated judge on loopback, no faults: once with direct calls and
once with `batch: true` judges (OpenAI Batch dialect). Each row counts planned calls,
stored replies, chat completions / messages requests sent (one per call direct, none
batched), provider batches submitted, and wall time; a last line
says whether both runs stored the same replies. Columns are a list of (heading, key) pairs:
add one to extend the table.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from _common import demo_args, demo_request, print_table, quiet_judge

from simjudge.server import SimJudgeServer
from tasks.judging.cache import read_replies
from tasks.judging.stage import run_judge_stage

COLUMNS: list[tuple[str, str]] = [
    ("mode", "mode"),
    ("planned calls", "planned"),
    ("stored", "stored"),
    ("chat/messages requests", "http_requests"),
    ("provider batches", "batches"),
    ("seconds", "seconds"),
]
"""The table's columns: (heading, row key)."""


def _run(root: Path, pairs: int, k: int, server: SimJudgeServer, batch: bool) -> dict[str, Any]:
    request, hooks = demo_request(root, pairs, k, server, batch=batch)
    started = time.perf_counter()
    counts = asyncio.run(run_judge_stage(request, hooks=hooks))
    log = server.request_log()
    batches = sum(1 for e in log if e.get("batch_id"))
    judged = sum(1 for e in log if e.get("call_key"))
    row = {
        "mode": "batch" if batch else "direct",
        "planned": counts["planned"],
        "stored": counts["stored"],
        # Batched calls are answered inside the judge, not as requests of their own.
        "http_requests": 0 if batch else judged,
        "batches": batches,
        "seconds": round(time.perf_counter() - started, 1),
        "replies": sorted(
            (r["call_key"], r["raw_reply"]) for r in read_replies(request.work).to_pylist()
        ),
    }
    return row


def main() -> None:
    args = demo_args(__doc__)
    with quiet_judge() as (tmp, server):
        rows = [
            _run(tmp / str(batch), args.pairs, args.k, server, batch) for batch in (False, True)
        ]
    print_table(COLUMNS, rows)
    same = rows[0]["replies"] == rows[1]["replies"]
    print(f"same replies under the same call keys: {same}")


if __name__ == "__main__":
    main()
