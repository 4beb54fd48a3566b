"""A reparse keeps its run's record like every job that changes a run: it holds the run's
lock (refused while another process holds it) and ends with the status the run's health
says, with the command line's exit code for it."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from support import REPO, stage_demo_plan
from typer.testing import CliRunner

import tasks.prompts.parsing as parsing
from flows.cli import app
from flows.imports import reparse_flow
from flows.stageflows import judge_flow
from schemas.judge import JudgeSpec
from schemas.run import RunRecord
from simjudge.server import SimJudgeServer
from tasks.errors import InputError
from tasks.runs.folder import RunFolder
from tasks.runs.record import code_version, read_record, write_record
from tasks.store.workdir import WorkDir

Parser = Callable[[str], parsing.ParsedReply]
HOLD = (
    "import sys\n"
    "from tasks.judging.claims import RunLock\n"
    "from tasks.store.workdir import WorkDir\n"
    "RunLock(WorkDir.at(sys.argv[1]), sys.argv[2]).acquire()\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.fixture
def holder(work: WorkDir) -> Iterator[subprocess.Popen[str]]:
    """Another process holding run R's lock until the test ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(work.root), "R"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    proc.communicate("", timeout=30)


def _record(run_id: str, status: str, plan_id: str | None = None) -> RunRecord:
    return RunRecord.model_validate(
        {
            "run_id": run_id,
            "name": "nightly",
            "status": status,
            "config_hash": "0" * 64,
            "config": {"k": 2},
            "code": code_version().model_dump(),
            "started_at": dt.datetime.now(dt.UTC),
            "plan_id": plan_id,
        }  # fmt: skip
    )


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_reparse_is_refused_while_another_process_holds_the_run(
    work: WorkDir, holder: subprocess.Popen[str]
) -> None:
    path = write_record(work, _record("R", "degraded"))
    before = path.read_bytes()
    with pytest.raises(InputError) as refused:
        asyncio.run(reparse_flow("R", str(work.root)))
    message = str(refused.value)
    assert "\n" not in message
    assert f"run 'R' is being judged by another process (pid {holder.pid} on " in message
    assert path.read_bytes() == before  # nothing written into the other process's run
    assert not RunFolder(work, "R").table("labels").exists()


def _breaking(every: int) -> Callable[[Parser], Parser]:
    """A parser change that reads only one reply in `every` (in the order parsed)."""
    count = itertools.count()

    def wrap(original: Parser) -> Parser:
        def parse(text: str) -> parsing.ParsedReply:
            if next(count) % every:
                return parsing.ParsedReply(label="Invalid", strength=None, note="unreadable")
            return original(text)

        return parse

    return wrap


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_reparse_ends_with_the_status_of_the_runs_health(
    work: WorkDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged = stage_demo_plan(work, pairs=6, k=2)
    with SimJudgeServer() as server:
        judge = JudgeSpec(name="s", base_url=server.base_url, simulated=True, model="strong")
        asyncio.run(
            judge_flow(run_id="J", plan_id=staged.plan_id, judges=[judge], work_dir=str(work.root))
        )
    write_record(work, _record("J", "completed", staged.plan_id))
    cli = CliRunner()
    args = ["--work-dir", str(work.root), "reparse", "J"]
    originals = dict(parsing._PARSERS)  # noqa: SLF001

    # A parser that reads a quarter of the replies: fewer than half valid, so degraded.
    for version in ("unreadable-1", "unreadable-2"):  # a degraded run stays degraded
        wrap = _breaking(4)
        for template, parse in originals.items():
            monkeypatch.setitem(parsing._PARSERS, template, wrap(parse))  # noqa: SLF001
        monkeypatch.setattr(parsing, "PARSER_VERSION", version)
        result = cli.invoke(app, args)
        assert result.exit_code == 3, result.output
        assert "run J degraded" in result.output
        assert f"re-labelled under parser {version}" in result.output
        record = read_record(work, "J")
        assert record.status == "degraded" and record.error is None
        (health,) = record.health
        assert 0 < health.valid < health.planned / 2
        assert "reparse" in record.stage_seconds and record.ended_at is not None

    # A parser that reads every reply again: the run's health says completed.
    for template, parse in originals.items():
        monkeypatch.setitem(parsing._PARSERS, template, parse)  # noqa: SLF001
    monkeypatch.setattr(parsing, "PARSER_VERSION", "readable")
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "re-labelled under parser readable" in result.output
    record = read_record(work, "J")
    assert record.status == "completed"
    assert record.health[0].valid > record.health[0].planned / 2
