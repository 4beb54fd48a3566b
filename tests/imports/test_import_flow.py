"""The import flow end to end, and reparse after a parser change: nothing is ever sent."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support import stage_demo_plan

import tasks.prompts.parsing as parsing
from flows.imports import import_flow, no_replay_reason, reparse_flow
from flows.stageflows import judge_flow
from schemas.judge import JudgeSpec
from schemas.run import RunRecord
from simjudge.server import SimJudgeServer
from tasks.errors import InputError
from tasks.runs.folder import RunFolder
from tasks.runs.health import RunNotCompleted
from tasks.runs.jobs import scan_records
from tasks.runs.record import code_version, list_records, read_record, write_record
from tasks.store.workdir import WorkDir
from tests.imports.test_judgebench import NAME, _entry, _file, _line, _write


@pytest.mark.slow
def test_import_then_reparse(
    tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = WorkDir.at(tmp_path / "work")
    # One of the six judgments has no reply (not_recorded): more than 10%, so degraded.
    with pytest.raises(RunNotCompleted) as imported:
        asyncio.run(import_flow("judgebench", [str(_file(tmp_path))], str(work.root), "imp-1"))
    record = imported.value.result
    assert record is not None and record["status"] == "degraded"
    assert record["calls"]["sent"] == 0
    assert record["imported"]["agreement"]["agree"] == 4
    assert record["imported"]["replay"] == no_replay_reason(1)
    (summary,) = record["imported"]["summary"]
    assert (summary["pairs"], summary["replies"], summary["without_reply"]) == (3, 5, 1)
    assert Path(record["report"]).is_file()
    (listed,) = list_records(work)
    assert listed.imported is not None and listed.imported["tool"] == "judgebench"
    assert "import" in listed.stage_seconds
    assert [(e.run_id, e.status) for e in scan_records(work)] == [("imp-1", "degraded")]

    # A new parser version that reads only strong verdicts differently.
    original = parsing._PARSERS["arena-hard-v1"]  # noqa: SLF001

    def changed(text: str) -> parsing.ParsedReply:
        if "[[A>>B]]" in text:
            return parsing.ParsedReply(label="Tie", strength=None, note=None)
        return original(text)

    monkeypatch.setitem(parsing._PARSERS, "arena-hard-v1", changed)  # noqa: SLF001
    monkeypatch.setattr(parsing, "PARSER_VERSION", "2")
    with pytest.raises(RunNotCompleted) as degraded:
        asyncio.run(reparse_flow("imp-1", str(work.root)))
    assert degraded.value.status == "degraded"
    assert read_record(work, "imp-1").status == "degraded"
    counts = degraded.value.result
    assert counts is not None and counts["parser_version"] == "2"
    assert counts["relabelled"] == 1
    labels = pq.read_table(RunFolder(work, "imp-1").table("labels")).to_pylist()
    assert {r["parser_version"] for r in labels} == {"2"}
    disp = {
        r["pair_id"]: r["disposition"]
        for r in pq.read_table(RunFolder(work, "imp-1").table("dispositions")).to_pylist()
    }
    assert disp["p-left"] == "mixed"


@pytest.mark.slow
def test_reparse_of_a_judged_run_sends_nothing(
    tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-judgeline-reparse-3b1f"
    monkeypatch.setenv("JUDGELINE_TEST_KEY", key)
    work = WorkDir.at(tmp_path / "work")
    staged = stage_demo_plan(work, pairs=6, k=2)
    with SimJudgeServer(api_key=key) as server:
        judge = JudgeSpec.model_validate(
            {
                "name": "strong-judge",
                "base_url": server.base_url,
                "simulated": True,
                "model": "strong",
                "api_key_env": "JUDGELINE_TEST_KEY",
            }  # fmt: skip
        )
        counts = asyncio.run(
            judge_flow(run_id="judged", plan_id=staged.plan_id, judges=[judge],
                       work_dir=str(work.root))
        )  # fmt: skip
        sent = len(server.request_log())
        assert sent == counts["sent"] > 0
        write_record(
            work,
            RunRecord(
                run_id="judged",
                name="nightly",
                status="completed",
                config_hash="0" * 64,
                config={"k": 2},
                code=code_version(),
                started_at=dt.datetime.now(dt.UTC),
                manifest_hash=staged.manifest.column("manifest_hash")[0].as_py(),
                plan_id=staged.plan_id,
            ),  # fmt: skip
        )
        monkeypatch.setattr(parsing, "PARSER_VERSION", "reparse-test")
        reparsed = asyncio.run(reparse_flow("judged", str(work.root)))
        assert len(server.request_log()) == sent  # not one request more
    assert reparsed["parser_version"] == "reparse-test"
    labels = pq.read_table(RunFolder(work, "judged").table("labels")).to_pylist()
    assert len(labels) == counts["stored"]
    assert {r["parser_version"] for r in labels} == {"reparse-test"}


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_refused_import_leaves_no_run(tmp_path: Path) -> None:
    work = WorkDir.at(tmp_path / "work")
    twice = _line("p", "A>B", _entry("[[A>B]]", "A>B"), None)
    path = _write(tmp_path / NAME, [twice, twice])
    with pytest.raises(InputError, match="judged twice"):
        asyncio.run(import_flow("judgebench", [str(path)], str(work.root), "imp-2"))
    assert scan_records(work) == []
    assert not RunFolder(work, "imp-2").exists()
