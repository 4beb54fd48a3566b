"""Calls, tokens and money of the demo: the full grid and live paired unanimity, each sent
directly and as provider batches. Prints a table.

Usage: python bench/cost.py [--pairs 150] [--k 4]

Each of the four runs judges the demo benchmark (three personas x two reasoning configs)
against the simulated judge on loopback, no faults, in a fresh work directory (nothing
cached), at the demo judges' illustrative price (`tasks.demo.DEMO_PRICE`, batch discount
0.5). Tokens and USD are the run's spend (`tasks.judging.spend.run_spend`: sent calls
only); `provider batches` counts batch submissions in the simulated judge's request log
(live paired unanimity sends two waves, so two batches per judge). The `ratio` column is a
row's USD over the direct full grid's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support import stage_demo_plan  # noqa: E402

from tasks.demo import demo_config  # noqa: E402
from tasks.judging.batch_api import PollSchedule, batch_sender  # noqa: E402
from tasks.judging.request import JudgeRequest, StageHooks  # noqa: E402
from tasks.judging.spend import run_spend  # noqa: E402
from tasks.judging.stage import run_judge_stage  # noqa: E402
from tasks.live.outcomes import remap_executed  # noqa: E402
from tasks.live.stage import LiveRequest, run_live_stage  # noqa: E402
from tasks.simjudge.server import SimJudgeServer  # noqa: E402
from tasks.workdir import WorkDir  # noqa: E402

SUBMIT_PATHS = {"/v1/batches", "/v1/messages/batches"}
COLUMNS: list[tuple[str, str]] = [
    ("policy", "policy"),
    ("mode", "mode"),
    ("calls sent", "sent"),
    ("provider batches", "batches"),
    ("prompt tokens", "prompt"),
    ("completion tokens", "completion"),
    ("USD", "usd"),
    ("ratio", "ratio"),
]
"""The table's columns: (heading, row key)."""


def _run(root: Path, pairs: int, k: int, server: SimJudgeServer, batch: bool,
         live: bool) -> dict[str, Any]:  # fmt: skip
    staged = stage_demo_plan(WorkDir(root), pairs=pairs, k=k)
    judges = tuple(
        j.model_copy(update={"batch": batch, "simulated": True})
        for j in demo_config(server.base_url, k=k).judges
    )
    request = JudgeRequest(staged.work, "bench", staged.plan_id, judges)
    schedule = PollSchedule(first_s=0.2, factor=1.5, max_s=1.0)
    hooks = StageHooks(remote=lambda r: batch_sender(r, schedule=schedule))
    server.clear_log()
    if live:
        live_request = LiveRequest(request, rng_seed=7)
        asyncio.run(run_live_stage(live_request, remap_executed, hooks=hooks))
    else:
        asyncio.run(run_judge_stage(request, hooks=hooks))
    spend = run_spend(staged.work, "bench")
    log = server.request_log()
    return {
        "policy": "paired unanimity (live)" if live else "full grid",
        "mode": "batch" if batch else "direct",
        "sent": sum(s.sent_calls for s in spend),
        "batches": sum(1 for e in log if e["path"] in SUBMIT_PATHS),
        "prompt": sum(s.prompt_tokens for s in spend),
        "completion": sum(s.completion_tokens for s in spend),
        "usd": sum(s.usd or 0.0 for s in spend),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=150)
    parser.add_argument("--k", type=int, default=4)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SimJudgeServer() as server:
        server.set_faults(rate_429=0, rate_5xx=0, rate_stall=0, rate_malformed=0,
                          rate_truncated=0)  # fmt: skip
        for live in (False, True):
            for batch in (False, True):
                root = Path(tmp) / f"{live}-{batch}"
                rows.append(_run(root, args.pairs, args.k, server, batch, live))
    base = rows[0]["usd"]
    for row in rows:
        row["ratio"] = f"{row['usd'] / base:.3f}" if base else "-"
        row["usd"] = f"{row['usd']:.4f}"
    print(f"demo: {args.pairs} pairs, K = {args.k}, 3 judges x 2 configs")
    print("| " + " | ".join(h for h, _ in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for _, key in COLUMNS) + " |")


if __name__ == "__main__":
    main()
