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

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support import stage_demo_plan  # noqa: E402

from tasks.demo import demo_config  # noqa: E402
from tasks.judging.batch_api import PollSchedule, batch_sender  # noqa: E402
from tasks.judging.cache import read_replies  # noqa: E402
from tasks.judging.request import JudgeRequest, StageHooks  # noqa: E402
from tasks.judging.stage import run_judge_stage  # noqa: E402
from tasks.simjudge.server import SimJudgeServer  # noqa: E402
from tasks.workdir import WorkDir  # noqa: E402

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
    staged = stage_demo_plan(WorkDir(root), pairs=pairs, k=k)
    judges = tuple(
        j.model_copy(update={"batch": batch, "simulated": True})
        for j in demo_config(server.base_url, k=k).judges
    )
    request = JudgeRequest(staged.work, "bench", staged.plan_id, judges)
    schedule = PollSchedule(first_s=0.2, factor=1.5, max_s=1.0)
    hooks = StageHooks(remote=lambda r: batch_sender(r, schedule=schedule))
    server.clear_log()
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
            (r["call_key"], r["raw_reply"]) for r in read_replies(staged.work).to_pylist()
        ),
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=150)
    parser.add_argument("--k", type=int, default=4)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SimJudgeServer() as server:
        server.set_faults(rate_429=0, rate_5xx=0, rate_stall=0, rate_malformed=0,
                          rate_truncated=0)  # fmt: skip
        for batch in (False, True):
            rows.append(_run(Path(tmp) / str(batch), args.pairs, args.k, server, batch))
    print("| " + " | ".join(h for h, _ in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for _, key in COLUMNS) + " |")
    same = rows[0]["replies"] == rows[1]["replies"]
    print(f"same replies under the same call keys: {same}")


if __name__ == "__main__":
    main()
