"""What the demo benchmarks share: this checkout on the path, a temporary folder with the
simulated judge (no faults), a staged demo judge request, the command line and the table.

Imported by the scripts in this folder by its bare name (`python bench/X.py` puts the folder
first on the path), before any project module, so that they import this checkout's code.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support import stage_demo_plan  # noqa: E402

from simjudge.demo import demo_config  # noqa: E402
from simjudge.server import SimJudgeServer  # noqa: E402
from tasks.judging.batch_api import PollSchedule, batch_sender  # noqa: E402
from tasks.judging.request import JudgeRequest, StageHooks  # noqa: E402
from tasks.store.workdir import WorkDir  # noqa: E402


def demo_args(doc: str) -> argparse.Namespace:
    """`--pairs` (default 150) and `--k` (default 4), described by the script's docstring."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=150)
    parser.add_argument("--k", type=int, default=4)
    return parser.parse_args()


@contextmanager
def quiet_judge() -> Iterator[tuple[Path, SimJudgeServer]]:
    """A temporary folder and the simulated judge on loopback, with every fault rate zero."""
    with tempfile.TemporaryDirectory() as tmp, SimJudgeServer() as server:
        server.set_faults(rate_429=0, rate_5xx=0, rate_stall=0, rate_malformed=0,
                          rate_truncated=0)  # fmt: skip
        yield Path(tmp), server


def demo_request(
    root: Path, pairs: int, k: int, server: SimJudgeServer, *, batch: bool
) -> tuple[JudgeRequest, StageHooks]:
    """The demo plan staged in a fresh work directory at `root`, a judge request of run
    `bench` for the demo judges on `server` (as provider batches if `batch`), and hooks that
    poll batches quickly; the server's request log is cleared, ready for the run."""
    staged = stage_demo_plan(WorkDir(root), pairs=pairs, k=k)
    judges = tuple(
        j.model_copy(update={"batch": batch, "simulated": True})
        for j in demo_config(server.base_url, k=k).judges
    )
    request = JudgeRequest(staged.work, "bench", staged.plan_id, judges)
    schedule = PollSchedule(first_s=0.2, factor=1.5, max_s=1.0)
    hooks = StageHooks(sender=lambda r: batch_sender(r, schedule=schedule))
    server.clear_log()
    return request, hooks


def print_table(columns: Sequence[tuple[str, str]], rows: Sequence[dict[str, Any]]) -> None:
    """A Markdown table: `columns` are (heading, row key) pairs."""
    print("| " + " | ".join(h for h, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for _, key in columns) + " |")


def warm_prefect() -> float:
    """Start Prefect's ephemeral server with an empty flow, so no measured step pays for it;
    returns the seconds it took."""
    import asyncio
    import time

    from prefect import flow

    @flow(name="bench-warm-up")
    async def warm() -> int:
        return 1

    started = time.perf_counter()
    asyncio.run(warm())
    return time.perf_counter() - started
