"""Calls, tokens and money of the demo: the full grid and live paired unanimity, each sent
directly and as provider batches. Prints a table.

Usage: python bench/cost.py [--pairs 150] [--k 4]

Each of the four runs judges the demo benchmark (three personas x two reasoning configs)
against the simulated judge on loopback, no faults, in a fresh work directory (nothing
cached), at the demo judges' illustrative price (`simjudge.demo.DEMO_PRICE`, batch discount
0.5). Tokens and USD are the run's spend (`tasks.judging.spend.run_spend`: sent calls
only); `provider batches` counts batch submissions in the simulated judge's request log
(live paired unanimity sends two waves, so two batches per judge). The `ratio` column is a
row's USD over the direct full grid's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from _common import demo_args, demo_request, print_table, quiet_judge

from simjudge.server import SimJudgeServer
from tasks.judging.spend import run_spend
from tasks.judging.stage import run_judge_stage
from tasks.live.outcomes import remap_executed
from tasks.live.stage import LiveRequest, run_live_stage

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
    request, hooks = demo_request(root, pairs, k, server, batch=batch)
    if live:
        live_request = LiveRequest(request, rng_seed=7)
        asyncio.run(run_live_stage(live_request, remap_executed, hooks=hooks))
    else:
        asyncio.run(run_judge_stage(request, hooks=hooks))
    spend = run_spend(request.work, "bench")
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
    args = demo_args(__doc__)
    rows = []
    with quiet_judge() as (tmp, server):
        for live in (False, True):
            for batch in (False, True):
                root = tmp / f"{live}-{batch}"
                rows.append(_run(root, args.pairs, args.k, server, batch, live))
    base = rows[0]["usd"]
    for row in rows:
        row["ratio"] = f"{row['usd'] / base:.3f}" if base else "-"
        row["usd"] = f"{row['usd']:.4f}"
    print(f"demo: {args.pairs} pairs, K = {args.k}, 3 judges x 2 configs")
    print_table(COLUMNS, rows)


if __name__ == "__main__":
    main()
