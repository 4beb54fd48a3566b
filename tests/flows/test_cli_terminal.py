"""What the installed `judgeline` prints in an 80-column terminal for a real run: run ids
whole, the configured design's scores, the run's name, failed and running runs said so,
failed calls with the provider's message, and a replay summary with whole numbers."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import REPO

from schemas.run import CodeVersion, RunRecord
from simjudge.server import SimJudgeServer
from tasks.judging.claims import RunLock
from tasks.runs.record import write_record
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
RUN_ID = "20261130T020000Z-c0ffee"
NAME = "ux-night"
MAPPING = "question=q,answer_a=x,answer_b=y,key=label{A>B:A,B>A:B}"


@dataclass(frozen=True)
class Night:
    work: WorkDir
    folder: Path
    run: subprocess.CompletedProcess[str]


def judgeline(work: WorkDir, *args: str) -> subprocess.CompletedProcess[str]:
    """`judgeline --work-dir WORK ARGS` in a fresh process, as in an 80-column terminal."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL",)}
    env.pop("JUDGELINE_WORK_DIR", None)
    env["COLUMNS"] = "80"
    argv = [JUDGELINE, "--work-dir", str(work.root), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


def _write_inputs(folder: Path, base_url: str) -> Path:
    with (folder / "pairs.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["q", "x", "y", "label"])
        for i in range(12):
            writer.writerow(
                [f"question {i}", f"answer x{i}", f"answer y{i}", ["A>B", "B>A"][i % 2]]
            )
    config = folder / "night.yaml"
    config.write_text(
        f"""name: {NAME}
datasets:
  - {{kind: table, path: {folder / "pairs.csv"}, mapping: "{MAPPING}"}}
judges:
  - {{name: strong, base_url: "{base_url}", model: strong, simulated: true}}
  - {{name: ghost, base_url: "{base_url}", model: no-such-model, simulated: true}}
k: 2
designs: [common]
policies: [full, nonstrict, strict]
""",
        "utf-8",
    )
    return config


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Night]:
    folder = tmp_path_factory.mktemp("terminal")
    work = WorkDir(folder / "work")
    with SimJudgeServer() as server:
        config = _write_inputs(folder, server.base_url)
        run = judgeline(work, "run", str(config), "--run-id", RUN_ID)
    yield Night(work, folder, run)


def _record(work: WorkDir, run_id: str, status: str, error: str | None) -> None:
    write_record(
        work,
        RunRecord(
            run_id=run_id,
            name="broken",
            status=status,  # type: ignore[arg-type]
            config_hash="0" * 64,
            config={"k": 2},
            code=CodeVersion(commit=None, dirty=None, packages={}),
            started_at=dt.datetime(2026, 11, 30, 3, tzinfo=dt.UTC),
            error=error,
        ),
    )


def test_the_run_shows_the_first_designs_scores_and_its_name(night: Night) -> None:
    out = night.run.stdout
    # Degraded, by design: the ghost judge asks for a model that does not exist.
    assert night.run.returncode == 3, out + night.run.stderr
    assert NAME in out and "(common)" in out
    # Too wide for a table at 80 columns: turned, one line per column and a column per
    # judge config (it was one run-on paragraph per row), every number whole.
    assert re.search(
        r"^\s*score \(95% CI\)\s+no valid outcome\s+\d\.\d{3} \(\d\.\d\d-\d\.\d\d\)\s*$", out, re.M
    ), out
    assert re.search(r"^\s*ghost\s+strong\s*$", out, re.M), out
    assert "…" not in out and "nan" not in out and "; conflicts" not in out
    # The table and its caption fit (the reasons before it hold a command: not wrapped).
    table = out[out.index(f"run {RUN_ID} · {NAME}") : out.index("report: ")]
    assert max(len(line) for line in table.splitlines()) <= 80, out
    assert f"work/runs/{RUN_ID}/report.html" in out  # the path is never broken
    assert "great_expectations" not in night.run.stderr


def test_runs_keeps_run_ids_whole_at_80_columns(night: Night) -> None:
    _record(night.work, "20261130T030000Z-dead01-a-long-suffix", "failed", "ValueError: x")
    listed = judgeline(night.work, "runs")
    assert listed.returncode == 0, listed.stderr
    assert RUN_ID in listed.stdout and "20261130T030000Z-dead01-a-long-suffix" in listed.stdout
    assert NAME in listed.stdout and "…" not in listed.stdout
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80


def test_show_and_report_of_a_failed_run_say_why(night: Night) -> None:
    _record(night.work, "failed-run", "failed", "InputError: judge 'j': variable K is not set")
    shown = judgeline(night.work, "show", "failed-run")
    assert shown.returncode == 2, shown.stdout + shown.stderr
    text = " ".join(shown.stderr.split())
    assert text.startswith("error: run 'failed-run'") and "failed: InputError: judge 'j'" in text
    assert shown.stdout.strip() == ""  # no empty table
    report = judgeline(night.work, "report", "failed-run")
    assert report.returncode == 2, report.stdout + report.stderr
    text = " ".join(report.stderr.split())
    assert "has no outcomes to report (status failed: InputError" in text, text
    assert not (night.work.run_dir("failed-run") / "report.html").exists()


def test_show_of_a_running_run_says_so(night: Night) -> None:
    _record(night.work, "running-run", "running", None)
    with RunLock(night.work, "running-run"):  # its process is alive
        shown = judgeline(night.work, "show", "running-run")
    assert shown.returncode == 0, shown.stderr
    assert "running-run (broken) is running since 2026-11-30 03:00 UTC" in " ".join(
        shown.stdout.split()
    )
    assert "judge · config" not in shown.stdout


def test_show_of_a_run_whose_process_died_says_how_to_resume(night: Night) -> None:
    _record(night.work, "dead-run", "running", None)  # nobody holds its lock
    shown = judgeline(night.work, "show", "dead-run")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "dead-run (broken, started 2026-11-30 03:00 UTC) was interrupted" in text, text
    assert "rerun-failed dead-run` takes it up again" in text, text


def test_failures_lists_failed_calls_with_the_providers_message(night: Night) -> None:
    listed = judgeline(night.work, "failures", RUN_ID)
    assert listed.returncode == 0, listed.stderr
    text = " ".join(listed.stdout.split())
    assert "ghost · default" in text and "strong ·" not in text, text
    assert "HTTP 404" in text and "no-such-model" in text, text
    # One message per failure, however many calls (their request ids differ), counted.
    assert text.count("no-such-model") == 1 and re.search(r"\d+ × HTTP 404", text), text
    assert "never sent" in text  # the calls the breaker held after the 404s
    assert f"rerun-failed {RUN_ID}" in text
    # Messages wrap at the terminal's width; only the command stays whole on one line.
    lines = [line for line in listed.stdout.splitlines() if "rerun-failed" not in line]
    assert max(len(line) for line in lines) <= 80


def test_replay_summary_numbers_are_whole_at_80_columns(night: Night) -> None:
    outcomes = night.work.run_dir(RUN_ID) / "outcomes.parquet"
    replayed = judgeline(
        night.work, "replay", "--calls", str(outcomes), "--out", str(night.folder / "replay")
    )
    assert replayed.returncode == 0, replayed.stderr
    assert "…" not in replayed.stdout
    assert re.search(
        r"strong · \S+ · pairs · common · nonstrict \(12 pairs\): calls \d",
        " ".join(replayed.stdout.split()),
    ), replayed.stdout


def test_tables_have_json_for_scripts(night: Night) -> None:
    """`--json` on the commands that print a table: the same data, parsed by a script."""
    listed = judgeline(night.work, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    runs = {r["run_id"]: r for r in json.loads(listed.stdout)}
    assert runs[RUN_ID]["status"] == "degraded" and runs[RUN_ID]["name"] == NAME
    assert runs[RUN_ID]["calls"]["planned"] == 96

    shown = judgeline(night.work, "show", RUN_ID, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["record"]["run_id"] == RUN_ID and data["reasons"]
    full = [r for r in data["scores"] if r["policy"] == "full" and r["judge"] == "strong"]
    assert full and all(isinstance(r["score"], float) for r in full)
    assert [r["judge"] for r in data["spend"]] == ["strong"]  # ghost stored no reply
    assert {r["judge"] for r in data["agreement"]} >= {"strong"}
    strong = next(r for r in data["agreement"] if r["judge"] == "strong")
    alpha = strong["alpha_all"]  # numbers, not "0.288 (0.20-0.38)"
    assert isinstance(alpha["estimate"], float)
    assert alpha["lower"] <= alpha["estimate"] <= alpha["upper"]

    failed = judgeline(night.work, "failures", RUN_ID, "--json")
    assert failed.returncode == 0, failed.stderr
    groups = json.loads(failed.stdout)
    assert {g["judge"] for g in groups["groups"]} == {"ghost"}
    assert groups["calls"] == sum(g["calls"] for g in groups["groups"]) > 0
    assert groups["rerun"].endswith(f"rerun-failed {RUN_ID}")

    advised = judgeline(night.work, "advise", RUN_ID, "--json")
    assert advised.returncode == 0, advised.stderr
    advice = json.loads(advised.stdout)
    assert advice["max_change"] == 0.01 and advice["advice"]
    assert {"judge", "config", "policy", "savings"} <= set(advice["advice"][0])

    config = night.folder / "night.yaml"
    estimated = judgeline(night.work, "estimate", str(config), "--json")
    assert estimated.returncode == 0, estimated.stderr
    rows = json.loads(estimated.stdout)
    assert {(r["judge"], r["config"]) for r in rows} == {
        ("strong", "default"),
        ("ghost", "default"),
    }
    assert all(r["planned_calls"] == 48 for r in rows)


def test_the_advice_and_estimate_tables_fit_80_columns(night: Night) -> None:
    for args in (["advise", RUN_ID], ["estimate", str(night.folder / "night.yaml")]):
        printed = judgeline(night.work, *args)
        assert printed.returncode == 0, printed.stderr
        lines = printed.stdout.splitlines()
        assert "…" not in printed.stdout and max(len(line) for line in lines) <= 80, printed.stdout
        assert "; " not in " ".join(lines[:3]), printed.stdout  # no run-on `key value; ...`
