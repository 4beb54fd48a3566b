"""A full disk while judging: the stage stops sending at the first write refused for want of
space, keeps every reply it received (in the journal, in the space its reserve held), and
says so in one line naming the file system; the resume sends only what has no stored
reply: the simulated judge's request log shows 0 calls paid twice.

Before, the stage kept sending after ENOSPC and lost every reply it received meanwhile: 90
of 320 calls paid twice on resume in this test's setting. The file system is a tmpfs the
test mounts, or where it may not, a space budget on the stage's writes (`small_disk`)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import NO_FAULTS, stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.errors import DiskFull
from tasks.judging.batches import RESERVE_BOUNDS
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.store.workdir import WorkDir
from tests.judging.small_disk import Tmpfs, small_disk

FREE_AFTER_RESERVE = 80 * 1024
"""Free space left for the first stage beyond the journal's reserve: about 140 replies."""


def paid_twice(log: list[dict[str, Any]]) -> int:
    """Calls the judge answered more than once (each answer is paid)."""
    answered = Counter(
        e["call_key"] for e in log if e.get("status") == 200 and e.get("fault") is None
    )
    return sum(n - 1 for n in answered.values())


def _judges_file(folder: Path, server: SimJudgeServer, **kw: Any) -> Path:
    judge = JudgeSpec(name="j", base_url=server.base_url, model="strong", simulated=True, **kw)
    path = folder / "judges.yaml"
    path.write_text(yaml.safe_dump({"judges": [judge.model_dump(mode="json")]}))
    return path


def _submissions(server: SimJudgeServer) -> list[dict[str, Any]]:
    return [e for e in server.request_log() if e["path"] in ("/v1/batches", "/v1/messages/batches")]


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
    from tasks.runs.jobs import scan_records
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


def _when(condition: Callable[[], bool], then: Callable[[], None]) -> threading.Thread:
    """Run `then` (filling the disk) in a thread as soon as `condition` holds."""

    def watch() -> None:
        deadline = time.monotonic() + 240
        while not condition():
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)
        then()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _submitted(folder: Path) -> bool:
    return any(
        json.loads(p.read_text()).get("state") == "submitted" for p in folder.glob("jl-*.json")
    )


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_provider_batch_results_a_full_disk_refuses_are_fetched_again_not_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A provider batch whose results arrive on a full disk: those the journal's reserve
    holds are kept, the batch stays `submitted`, the stage stops (exit 75, one line saying
    both), and the resume fetches the results from the provider: no call paid twice. Before,
    the batch was marked done with its results lost, and the rerun paid for all of it."""
    from tasks.judging.batch_api import BatchJournal
    from tasks.judging.cache import stored_keys
    from tasks.runs.jobs import scan_records
    from tests.flows.test_hostile_input import run_main

    with small_disk(monkeypatch) as disk, SimJudgeServer() as server:
        server.set_faults(**NO_FAULTS, max_faults_per_request=None)
        work = WorkDir(disk.root / "work")
        staged = stage_demo_plan(work, pairs=150, k=8)
        args = ["--work-dir", str(work.root), "judge", staged.plan_id, "--judges",
                str(_judges_file(disk.root, server, batch=True)), "--run-id", "B",
                "--no-progress"]  # fmt: skip
        batches = BatchJournal(work).folder
        _when(lambda: _submitted(batches), lambda: disk.leave(FREE_AFTER_RESERVE))
        stopped = run_main(monkeypatch, *args)
        assert stopped.code == 75, (stopped.out, stopped.err)
        (line,) = stopped.err.strip().splitlines()
        assert line.startswith("run B stopped: no space left on the file system mounted at")
        assert "Traceback" not in stopped.out + stopped.err
        kept = re.search(r"the (\d+) replies received are kept in the work dir's journal", line)
        waiting = re.search(r"the (\d+) calls of 1 provider batches are kept by the provider", line)
        assert kept is not None and waiting is not None, line
        assert [(e.run_id, e.status) for e in scan_records(work)] == [("B", "interrupted")]
        (entry,) = BatchJournal(work).open_entries()
        assert entry.state == "submitted"
        submissions = _submissions(server)
        assert len(submissions) == 1

        disk.free()
        assert len(stored_keys(work)) == int(kept.group(1))  # what the resume finds first
        resumed = run_main(monkeypatch, "--work-dir", str(work.root), "rerun-failed", "B",
                           "--no-progress")  # fmt: skip
        assert resumed.code == 0, (resumed.out, resumed.err)
        assert _submissions(server) == submissions  # fetched again, not submitted again
        log = server.request_log()
        distinct = {e["call_key"] for e in log if e.get("call_key")}
        assert paid_twice(log) == 0 and len(stored_keys(work)) == len(distinct)
        assert int(kept.group(1)) + int(waiting.group(1)) == len(distinct) > 2000, line
        assert not BatchJournal(work).open_entries()


def test_the_line_of_a_stopped_stage_says_what_each_sender_kept_and_what_it_pays_again() -> None:
    counts = {"planned": 10, "stored": 4, "sent": 9, "pending": 1, "at_provider": 3,
              "provider_batches": 1, "unjournaled": ["msgbatch_1"], "unkept": 1}  # fmt: skip
    said = str(DiskFull("R", "the file system mounted at /x", counts))
    assert "the 4 replies received are kept in the work dir's journal" in said
    assert "the 3 calls of 1 provider batches are kept by the provider" in said
    assert "batch msgbatch_1 could not be journaled" in said and "submitted again" in said
    assert "1 replies received could not be kept and are sent again" in said
    after = str(DiskFull("R", "the file system mounted at /x", {"planned": 10, "stored": 10},
                         judging=False, writing="/x/runs/R/labels.parquet"))  # fmt: skip
    assert after == (
        "run R stopped: no space left on the file system mounted at /x (writing "
        "/x/runs/R/labels.parquet); every reply is kept (10 of 10 planned calls stored); free "
        "space there"
    )
