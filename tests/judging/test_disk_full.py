"""A full disk while judging: the stage stops sending at the first write refused for want of
space, keeps every reply it received (in the journal, in the space its reserve held), and
says so in one line naming the file system; the resume sends only what has no stored
reply: the simulated judge's request log shows 0 calls paid twice.

Before, the stage kept sending after ENOSPC and lost every reply it received meanwhile: 90
of 320 calls paid twice on resume in this test's setting. The file system is a tmpfs the
test mounts, or where it may not, a space budget on the stage's writes (`small_disk`)."""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import stage_demo_plan

from schemas.judge import JudgeSpec
from tasks.errors import DiskFull
from tasks.judging.batches import RESERVE_BOUNDS
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.simjudge.server import SimJudgeServer
from tasks.workdir import WorkDir
from tests.judging.small_disk import Tmpfs, small_disk

FREE_AFTER_RESERVE = 80 * 1024
"""Free space left for the first stage beyond the journal's reserve: about 140 replies."""


def paid_twice(log: list[dict[str, Any]]) -> int:
    """Calls the judge answered more than once (each answer is paid)."""
    answered = Counter(e["call_key"] for e in log if e["status"] == 200 and e["fault"] is None)
    return sum(n - 1 for n in answered.values())


def test_no_room_for_the_reserve_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with small_disk(monkeypatch) as disk, SimJudgeServer() as server:
        work = WorkDir(disk.root / "work")
        staged = stage_demo_plan(work, pairs=4, k=2)
        judge = JudgeSpec(name="j", base_url=server.base_url, model="strong", simulated=True)
        disk.leave(RESERVE_BOUNDS[0] // 2)
        with pytest.raises(DiskFull, match="stopped before sending a call: no space left"):
            asyncio.run(run_judge_stage(JudgeRequest(work, "R", staged.plan_id, (judge,))))
        assert server.request_log() == []
        assert not list(work.journal.iterdir())  # no reserve or segment left behind


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_command_says_it_in_one_line_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`judgeline judge` on a disk that fills up: one line naming the file system and the
    command that resumes, exit 75; that command then completes, paying for no call twice."""
    from tasks.jobrecord import scan_records
    from tests.flows.test_hostile_input import run_main

    with small_disk(monkeypatch) as disk, SimJudgeServer() as server:
        work = WorkDir(disk.root / "work")
        staged = stage_demo_plan(work, pairs=40, k=4)
        args = ["--work-dir", str(work.root), "judge", staged.plan_id, "--base-url",
                server.base_url, "--model", "strong", "--simulated", "--run-id", "F",
                "--no-progress"]  # fmt: skip
        disk.leave(RESERVE_BOUNDS[0] + FREE_AFTER_RESERVE)
        stopped = run_main(monkeypatch, *args)
        assert stopped.code == 75, (stopped.out, stopped.err)
        (line,) = stopped.err.strip().splitlines()
        where = f" {disk.root} (tmpfs)" if isinstance(disk, Tmpfs) else ""
        assert line.startswith(f"run F stopped: no space left on the file system mounted at{where}")
        resume = f"judgeline --work-dir {work.root} rerun-failed F"
        assert line.endswith(f"free space there; resume with: {resume}"), line
        assert "Traceback" not in stopped.out + stopped.err
        kept = re.search(r"the (\d+) replies received are kept", line)
        assert kept is not None and 0 < int(kept.group(1)) < 320, line
        # Stopped at once: the calls in flight when the disk filled up, no more.
        assert len(server.request_log()) <= int(kept.group(1)) + 16

        assert [(e.run_id, e.status) for e in scan_records(work)] == [("F", "interrupted")]

        disk.free()
        resumed = run_main(monkeypatch, *resume.split()[1:], "--no-progress")
        assert resumed.code == 0, (resumed.out, resumed.err)
        # The replies kept were sent by this run: not `cached`, counted in what it sent.
        text = " ".join(resumed.out.split())
        assert "0 cached" in text, resumed.out
        assert f"sent {320 - int(kept.group(1))} (320 by this run in all)" in text, resumed.out
        log = server.request_log()
        assert paid_twice(log) == 0 and len({e["call_key"] for e in log}) == 320


def test_a_write_cut_short_by_a_full_disk_leaves_whole_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal line a full disk cut short is cut off, and the entries written again in
    the reserve's space: the next reader finds every reply and no torn line."""
    import errno

    import tasks.judging.journal as journal_module
    from tasks.judging.journal import ReplyJournal, dead_segments
    from tests.judging.test_cache import _reply

    log = ReplyJournal(tmp_path, reserve_bytes=1 << 16)
    log.write([(_reply("before"), [])])
    real_write, calls = os.write, []

    def full_once(fd: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data)[:40] if len(calls) == 1 else data)

    monkeypatch.setattr(journal_module.os, "write", full_once)
    log.write([(_reply("a"), []), (_reply("b"), [])])
    monkeypatch.undo()
    assert log.full is not None and log.reserve is None
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".reserve")]
    assert log.current is not None
    log.current.release()
    (segment,) = dead_segments(tmp_path)
    assert segment.bad_lines == []
    assert [r.call_key for r in segment.replies] == ["before", "a", "b"]
