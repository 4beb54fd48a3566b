"""A run that cannot be read (a table cut short, a damaged record or run.json) is skipped,
with one warning line naming it, wherever another run reads it: the report's "since the
previous run" section, alarms, the drift probe, trends, the warehouse behind `show` and
`advise`; `diff` naming it says what is damaged in one paragraph. And the previous run is
one of the same configuration: same name, K, template and judge configs.

The runs are imports built with plain functions (nothing is sent, no Prefect): A, B and C
of one configuration (K = 2), K1 and D of the same name with K = 1, OTHER of K = 4.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from support import REPO
from typer.testing import CliRunner

from flows.history import alarms_task
from flows.imports import import_flow
from flows.nightly import nightly_flow
from schemas.config import AlarmSpec, DatasetSpec, RunConfig
from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from schemas.vocabulary import CORE_POLICIES, DESIGNS
from simjudge.server import SimJudgeServer
from tasks.errors import JudgelineError
from tasks.history.diff import diff_runs
from tasks.history.probe import previous_probe
from tasks.history.trends import trend_points
from tasks.imports import build_import, import_config, read_imported
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.judging.estimate import estimate_config
from tasks.remap import remap_run, write_remap
from tasks.replay.stream import replay_file
from tasks.report.since import since_section
from tasks.runs.folder import RunFolder
from tasks.runs.jobs import new_record
from tasks.runs.record import list_records, read_record, write_record
from tasks.store.workdir import WorkDir
from tasks.warehouse import check_run_tables
from tests.imports.test_judgebench import NAME, _entry, _line, _write

START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
RUNS = {  # run id: (K, hours after START, pairs in order conflict)
    "A": (2, 0, 0),
    "K1": (1, 1, 0),
    "B": (2, 2, 1),
    "OTHER": (4, 3, 0),
    "C": (2, 4, 3),
    "D": (1, 5, 2),
}
DAMAGED = [
    "calls", "labels", "outcomes", "dispositions", "disclosure", "replay", "summary",
    "design", "components", "record.json", "run.json",
]  # fmt: skip
"""Every file of B's folder a reader may open: its tables, its record and its run.json."""
FAST = ("calls", "replay", "record.json")
"""The files checked in the fast loop (`-m "not slow"`); the whole suite checks all."""


def _lines(conflicts: int, seed: int) -> list[dict[str, Any]]:
    """Six pairs, stable A except the first `conflicts`, where the left slot wins both
    orders (the second judgment shows B first); each seed's file words its replies apart."""
    lines = []
    for i in range(6):
        second = "[[A>B]]" if i < conflicts else "[[B>A]]"
        first = _entry(f"Run {seed}: [[A>B]]", "A>B")
        lines.append(_line(f"p{i}", "A>B", first, _entry(second, second.strip("[]"))))
    return lines


def _import(root: Path, work: WorkDir, run_id: str, k: int, hours: int, conflicts: int) -> None:
    """An imported run of benchmark `bench` with K files, as `judgeline import` makes it."""
    paths = []
    for seed in range(k):
        folder = root / "files" / run_id / str(seed)
        folder.mkdir(parents=True)
        paths.append(_write(folder / NAME, _lines(conflicts, seed)))
    files = [read_imported("judgebench", p) for p in paths]
    record = new_record(run_id, "bench", import_config("judgebench", paths, files))
    built = build_import(work, files, run_id)
    write_remap(work, remap_run(work, run_id))
    folder = RunFolder(work, run_id)
    if k % 2 == 0:
        replay_file(folder.outcomes, folder.path, designs=DESIGNS, policies=CORE_POLICIES)
    record.manifest_hash, record.plan_id = built.manifest_hash, built.plan_id
    record.calls, record.status = built.counts, "completed"
    record.started_at = START + dt.timedelta(hours=hours)
    write_record(work, record)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> WorkDir:
    root = tmp_path_factory.mktemp("runs")
    work = WorkDir(root / "work")
    for run_id, spec in RUNS.items():
        _import(root, work, run_id, *spec)
    return work


@pytest.fixture(
    params=[d if d in FAST else pytest.param(d, marks=pytest.mark.slow) for d in DAMAGED]
)
def damaged(request: pytest.FixtureRequest, runs: WorkDir, tmp_path: Path) -> WorkDir:
    """A copy of the runs with one file of B cut to 100 bytes (`truncate -s 100`)."""
    work = WorkDir(tmp_path / "work")
    shutil.copytree(runs.root, work.root)
    name = str(request.param)
    folder = RunFolder(work, "B")
    path = folder.path / name if name.endswith(".json") else folder.table(name)
    with path.open("r+b") as f:
        f.truncate(100)
    return work


def _skips(caplog: pytest.LogCaptureFixture, run_id: str) -> list[str]:
    """The warning lines that name run `run_id`."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and f"run {run_id} " in r.getMessage()
    ]


def test_previous_run_is_one_of_the_same_configuration(runs: WorkDir) -> None:
    # K = 4 and K = 1 runs of the same name are other configurations.
    assert since_section(runs, "C").previous == "B"
    assert since_section(runs, "B").previous == "A"
    assert since_section(runs, "OTHER").previous is None
    assert since_section(runs, "A").previous is None


def test_a_k1_run_compares_with_the_previous_k1_run(runs: WorkDir) -> None:
    section = since_section(runs, "D")
    assert section.previous == "K1"
    assert section.lines[0] == "pairs: 6 shared, 0 added, 0 removed"
    [row] = section.rows
    assert row["score"] == "– (not replayed)" and row["flips"] == "2"
    from flows.cli import app

    result = CliRunner().invoke(app, ["--work-dir", str(runs.root), "diff", "K1", "D"])
    assert result.exit_code == 0, result.output
    assert "- (not replayed)" in result.output and "nan" not in result.output
    assert "agreement with itself" in result.output  # alpha needs no replay


def test_every_reader_skips_a_damaged_run(
    damaged: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # The report's section: C's previous run is A.
    assert since_section(damaged, "C").previous == "A"
    # Alarms, with C as a nightly run of the same configuration (name, K, template, judge ·
    # config) whose consistency fell since A.
    judge = JudgeSpec(
        name="judge-x", base_url="http://127.0.0.1:9/v1", model="m",
        configs=[ReasoningConfig(name="arena_hard")],
    )  # fmt: skip
    pairs = damaged.root / "pairs.jsonl"
    pairs.write_text('{"q": "q", "x": "a", "y": "b"}\n', "utf-8")
    table = DatasetSpec(kind="table", path=str(pairs), mapping="question=q,answer_a=x,answer_b=y")
    config = RunConfig(
        name="bench",
        datasets=[table],
        judges=[judge],
        k=2,
        alarms=AlarmSpec(consistency_drop=0.01),
    )
    record = read_record(damaged, "C")
    record.config = config.model_dump(mode="json")
    alarms = alarms_task.fn(str(damaged.root), record.model_dump(mode="json"))
    assert [a["previous"] for a in alarms if a["alarm"] == "consistency_drop"] == ["A"]
    # The drift probe: each run's probe is the run itself here; B's cannot be read.
    for run_id in ("A", "B"):
        try:
            probed = read_record(damaged, run_id)
        except JudgelineError:
            continue  # B's record is the damaged file
        probed.probe = {"run_id": run_id}
        write_record(damaged, probed)
    probe = previous_probe(damaged, "bench", "C")
    assert probe is not None and probe.run_id == "A"
    # An estimate's expected paired-unanimity share comes from the newest replay that can
    # be read (B's summary made the newest): C's.
    b_summary = RunFolder(damaged, "B").summary
    os.utime(b_summary, (b_summary.stat().st_atime, b_summary.stat().st_mtime + 3600))
    path = damaged.root / "bench.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")), "utf-8")
    [row] = estimate_config(path, damaged)
    expected = pq.read_table(RunFolder(damaged, "C").summary).to_pandas()
    expected = expected[(expected.design == "balanced") & (expected.policy == "paired_unanimity")]
    share = float(((1 - expected.savings) * expected.pairs).sum() / expected.pairs.sum())
    assert row.pu_expected_calls == pytest.approx(share * row.planned_calls)
    # Trends (and the warehouse under them) leave B out; the replayed runs stay.
    assert {p.run_id for p in trend_points(damaged)} == {"A", "C", "OTHER"}
    # A diff of other runs works; a diff naming B says what is damaged.
    assert diff_runs(damaged, "A", "C").pairs_shared == 6
    with pytest.raises(JudgelineError) as error:
        diff_runs(damaged, "A", "B")
    assert "run 'B'" in str(error.value) and str(RunFolder(damaged, "B").path) in str(error.value)
    # One warning line for all of it, naming B and its folder.
    [line] = _skips(caplog, "B")
    assert "cannot be read" in line and str(RunFolder(damaged, "B").path) in line


@pytest.mark.parametrize(
    "damaged",
    [d if d == "calls" else pytest.param(d, marks=pytest.mark.slow) for d in DAMAGED],
    indirect=True,
)
def test_commands_on_other_runs_skip_a_damaged_run(damaged: WorkDir) -> None:
    from flows.cli import app

    runner = CliRunner()
    for command in (["show", "C"], ["advise", "C"], ["report", "C"], ["trends"]):
        result = runner.invoke(app, ["--work-dir", str(damaged.root), *command])
        assert result.exit_code == 0, (command, result.output)
    report = (damaged.runs / "C" / "report.html").read_text("utf-8")
    assert "What changed since run <code>A</code>" in report


def _truncate(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(100)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_imports_compare_with_a_readable_import_of_their_k(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A K = 2 import after a K = 1 import of the same (default) name completes; a damaged
    earlier K = 2 import is skipped with one warning line; a K = 1 import's report compares
    with the earlier K = 1 import."""
    caplog.set_level(logging.WARNING)
    work = WorkDir(tmp_path / "work")

    def files(run_id: str, k: int, conflicts: int) -> list[str]:
        paths = []
        for seed in range(k):
            folder = tmp_path / run_id / str(seed)
            folder.mkdir(parents=True)
            paths.append(str(_write(folder / NAME, _lines(conflicts, seed))))
        return paths

    asyncio.run(import_flow("judgebench", files("one", 1, 0), str(work.root), "one"))
    asyncio.run(import_flow("judgebench", files("two", 2, 0), str(work.root), "two"))
    assert "No earlier completed run of this configuration" in _report(work, "two")
    _truncate(RunFolder(work, "two").calls)
    asyncio.run(import_flow("judgebench", files("three", 2, 1), str(work.root), "three"))
    assert "No earlier completed run of this configuration" in _report(work, "three")
    [line] = _skips(caplog, "two")
    assert str(RunFolder(work, "two").calls) in line
    asyncio.run(import_flow("judgebench", files("four", 1, 2), str(work.root), "four"))
    assert "What changed since run <code>one</code>" in _report(work, "four")
    assert {r.run_id: r.status for r in list_records(work)} == dict.fromkeys(
        ("one", "two", "three", "four"), "completed"
    )


def _report(work: WorkDir, run_id: str) -> str:
    return (work.runs / run_id / "report.html").read_text("utf-8")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_run_after_a_damaged_run_completes(tmp_path: Path) -> None:
    """`judgeline run` of a configuration whose previous run B has a cut calls.parquet:
    exit 0, one warning line naming B, no traceback; its report compares with A."""
    from prefect.settings import PREFECT_API_URL

    work = WorkDir(tmp_path / "work")
    rows = [
        {"id": p.pair_id, "q": p.question, "x": p.answer_a, "y": p.answer_b, "k": p.key}
        for p in demo_pairs()[:8]
    ]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    with SimJudgeServer() as server:
        config = RunConfig(
            name="nightly",
            datasets=[DatasetSpec(kind="table", path=str(data), dataset="d",
                                  mapping="pair_id=id,question=q,answer_a=x,answer_b=y,key=k")],
            judges=[JudgeSpec(name="j", base_url=server.base_url, model="strong", simulated=True)],
            k=2,
            alarms=AlarmSpec(),
        )  # fmt: skip
        for run_id in ("A", "B"):
            asyncio.run(
                nightly_flow(config=config.model_dump(mode="json"), work_dir=str(work.root),
                             run_id=run_id)
            )  # fmt: skip
        _truncate(RunFolder(work, "B").calls)
        path = tmp_path / "nightly.yaml"
        path.write_text(yaml.safe_dump(config.model_dump(mode="json")), "utf-8")
        env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()),
               "PYTHONPATH": str(REPO)}  # fmt: skip
        command = [sys.executable, "-c", "from flows.cli import main; main()"]
        done = subprocess.run(
            [*command, "--work-dir", str(work.root), "run", str(path), "--run-id", "C"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "Traceback" not in output
    [line] = [x for x in output.splitlines() if "run B cannot be read" in x]
    assert str(RunFolder(work, "B").calls) in line
    assert "What changed since run <code>A</code>" in _report(work, "C")
    assert read_record(work, "C").status == "completed"


def test_a_damaged_table_without_results_leaves_the_run_readable(
    runs: WorkDir, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Advice written before certificates (its columns missing) is no reason to skip B:
    only that file is left out of the warehouse; `show B` names the command that rewrites
    it."""
    caplog.set_level(logging.WARNING)
    work = WorkDir(tmp_path / "work")
    shutil.copytree(runs.root, work.root)
    old = pa.table({"judge": ["judge-x"], "config": ["arena_hard"], "rank": ["advised"]})
    pq.write_table(old, RunFolder(work, "B").table("advice"))
    assert since_section(work, "C").previous == "B"
    assert "B" in {p.run_id for p in trend_points(work)}
    assert _skips(caplog, "B") == []
    with pytest.raises(JudgelineError, match=r"advice.parquet holds no result .*: delete it"):
        check_run_tables(work, "B")
