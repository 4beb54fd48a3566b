"""Replies remap cannot read: the judge stage counts as stored only what remap can read (a
reply without its text is sent again), and a run's status counts what remap still found
missing."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pyarrow.parquet as pq
from support import stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.judging.cache import compact
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.remap.outcomes import remap_run, write_remap
from tasks.runs.folder import RunFolder
from tasks.runs.health import run_health, run_status
from tasks.store.workdir import WorkDir


def blank_replies(work: WorkDir, keys: set[str]) -> None:
    """Rewrite the reply cache as one file in which `keys` have a null raw_reply."""
    compact(work)
    (path,) = work.replies.glob("*.parquet")
    table = pq.read_table(path)
    text = [None if k in keys else t for k, t in zip(
        table.column("call_key").to_pylist(), table.column("raw_reply").to_pylist(), strict=True
    )]  # fmt: skip
    index = table.schema.get_field_index("raw_reply")
    table = table.set_column(index, pa.field("raw_reply", pa.string()), pa.array(text))
    path.unlink()
    pq.write_table(table, work.replies / "blanked.parquet")


def remapped_status(work: WorkDir, run_id: str) -> tuple[str, dict[str, int]]:
    write_remap(work, remap_run(work, run_id))
    (health,) = run_health(RunFolder(work, run_id))
    return run_status([health]), health.failed


def test_replies_without_text_are_sent_again_and_counted_when_lost(work: WorkDir) -> None:
    staged = stage_demo_plan(work, pairs=4, k=2)  # 16 calls
    with SimJudgeServer() as server:
        judge = JudgeSpec(name="j", base_url=server.base_url, model="strong", simulated=True)

        def judge_run(run_id: str) -> dict[str, object]:
            request = JudgeRequest(work, run_id, staged.plan_id, (judge,))
            return asyncio.run(run_judge_stage(request))

        assert judge_run("first")["sent"] == 16
        keys = sorted(set(pq.read_table(RunFolder(work, "first").calls)["call_key"].to_pylist()))
        lost = set(keys[:4])
        blank_replies(work, lost)
        server.clear_log()
        # The reported defect: `cached 16`, nothing sent, remap then found no reply to 4.
        counts = judge_run("second")
        assert counts["sent"] == 4 and counts["cached"] == 12, counts
        assert {e["call_key"] for e in server.request_log()} == lost
    assert remapped_status(work, "second") == ("completed", {})

    # Lost after the judge stage (damaged between it and remap): the status says so.
    blank_replies(work, set(keys[:2]))
    status, failed = remapped_status(work, "second")
    assert status == "degraded" and failed == {"unreadable": 2}, (status, failed)
