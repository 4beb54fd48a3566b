"""Every subcommand of the installed `judgeline`, given one bad input in a fresh process:
a non-zero exit and one paragraph naming the bad thing, with no traceback (Python's or a
Prefect run's) unless --debug."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO, bare_record

from tasks.runs.record import write_record
from tasks.store.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
# A line of Prefect's console log: `17:34:39.888 | ERROR   | Task run ...`.
PREFECT_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} \| ", re.MULTILINE)
JUDGES = "judges:\n  - {name: j, base_url: 'http://127.0.0.1:9/v1', model: m%s}\n"


@dataclass(frozen=True)
class Case:
    """A command line after `judgeline --work-dir WORK` and words its message must hold;
    `{d}` in either stands for the folder of bad inputs."""

    args: tuple[str, ...]
    words: tuple[str, ...]
    work: str = "{d}/work"


CASES = {
    "judge": Case(
        ("judge", "abc", "--judges", "{d}/bad_judges.yaml"),
        ("{d}/bad_judges.yaml", "judges.0.temprature: unknown field"),
    ),
    "rerun-failed": Case(("rerun-failed", "nosuchrun"), ("no run 'nosuchrun'",)),
    "failures": Case(("failures", "nosuchrun"), ("run 'nosuchrun' has no calls table",)),
    "live": Case(
        ("live", "abc", "--judges", "{d}/judges.yaml"), ("plan id 'abc' matches no plan",)
    ),
    "freeze": Case(
        ("freeze", "--judgebench", "{d}/bad.jsonl"),
        ("{d}/bad.jsonl, row 1: malformed JSON line",),
    ),
    "plan": Case(("plan", "deadbeef"), ("no manifest 'deadbeef'",)),
    "remap": Case(("remap", "nosuchrun"), ("no run 'nosuchrun'",)),
    "replay": Case(
        ("replay", "--calls", "{d}/bad.parquet", "--out", "{d}/out"),
        ("{d}/bad.parquet: not a replay input: missing columns",),
    ),
    "demo": Case(("demo",), ("{d}/afile: not usable as a work dir",), work="{d}/afile"),
    "estimate": Case(("estimate", "{d}/bad_run.yaml"), ("{d}/bad_run.yaml", "repeated key 'k'")),
    "run": Case(("run", "{d}/bad_run.yaml"), ("{d}/bad_run.yaml", "repeated key 'k'")),
    "runs": Case(("runs",), ("{d}/afile: not usable as a work dir",), work="{d}/afile"),
    "show": Case(("show", "nosuchrun"), ("no run 'nosuchrun'",)),
    "diff": Case(("diff", "nosuchrun", "other"), ("no run 'nosuchrun'",)),
    "trends": Case(("trends",), ("{d}/afile: not usable as a work dir",), work="{d}/afile"),
    "advise": Case(("advise", "nosuchrun"), ("run 'nosuchrun' has no outcomes",)),
    "import": Case(
        ("import", "judgebench", "{d}/missing.jsonl"), ("{d}/missing.jsonl: file not found",)
    ),
    "reparse": Case(("reparse", "nosuchrun"), ("no run 'nosuchrun'",)),
    "leaderboard": Case(("leaderboard", "nosuchrun"), ("no run 'nosuchrun'",)),
    "report": Case(("report", "nosuchrun"), ("no run 'nosuchrun'",)),
    "server": Case(("server", "start"), ("{d}/afile: not usable as a work dir",), work="{d}/afile"),
    "serve": Case(("serve", "{d}/bad_run.yaml"), ("{d}/bad_run.yaml", "repeated key 'k'")),
    "serve-judge": Case(
        ("serve-judge", "--personas", "{d}/bad_personas.yaml"),
        ("{d}/bad_personas.yaml", "non-empty list of personas"),
    ),
}

# Bad inputs beyond one per command.
EDGE_CASES = {
    "freeze answers without a baseline": Case(
        ("freeze", "--answers", "{d}/bad.jsonl"), ("--answers needs --baseline NAME",)
    ),
    "leaderboard rule": Case(
        ("leaderboard", "nosuchrun", "--rule", "elo"), ("--rule must be one of reference",)
    ),
    "serve-judge port out of range": Case(
        ("serve-judge", "--port", "99999999"), ("--port", "65535")
    ),
    "serve-judge fault rate out of range": Case(
        ("serve-judge", "--fault-529", "1.5"), ("--fault-529", "less than or equal to 1")
    ),
    "serve-judge fault rates over 1 together": Case(
        ("serve-judge", "--fault-quota", "0.7", "--fault-429", "0.6"),
        ("--fault-429, --fault-quota", "fault rates sum to 1.300 > 1"),
    ),
    "serve-judge negative latency": Case(
        ("serve-judge", "--latency-ms", "-5"), ("--latency-ms", "greater than or equal to 0")
    ),
    "show of a damaged record": Case(
        ("show", "damaged"), ("damaged", "record.json"), work="{d}/damaged"
    ),
}

# Bad inputs that still end in a traceback; each names where the check belongs.
KNOWN_GAPS: dict[str, tuple[Case, str]] = {}


def write_bad_inputs(d: Path) -> None:
    """The bad files every case refers to, in `d`."""
    (d / "bad_judges.yaml").write_text(JUDGES % ", temprature: 0", "utf-8")
    (d / "judges.yaml").write_text(JUDGES % "", "utf-8")
    (d / "bad.jsonl").write_text('{"x": ', "utf-8")
    pq.write_table(pa.table({"a": [1]}), d / "bad.parquet")
    (d / "bad_run.yaml").write_text("datasets: [{kind: demo}]\nk: 4\nk: 6\n", "utf-8")
    (d / "bad_personas.yaml").write_text("personas: 3\n", "utf-8")
    (d / "afile").write_text("a file, not a folder\n", "utf-8")
    (d / "damaged" / "runs" / "damaged").mkdir(parents=True)
    (d / "damaged" / "runs" / "damaged" / "record.json").write_text('{"run_id": 3', "utf-8")
    (d / "folder_record" / "runs" / "r1" / "record.json").mkdir(parents=True)
    healthy = bare_record("r2")
    write_record(WorkDir(d / "folder_record"), healthy)


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-inputs")
    write_bad_inputs(d)
    return d


def judgeline(d: Path, case: Case, *options: str) -> subprocess.CompletedProcess[str]:
    """`judgeline [OPTIONS] --work-dir WORK ARGS` in a fresh process; Prefect's home is the
    test session's (set by conftest), so its database is made once."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    env.pop("JUDGELINE_WORK_DIR", None)
    argv = [*options, "--work-dir", case.work, *case.args]
    return subprocess.run(
        [JUDGELINE, *(a.format(d=d) for a in argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def assert_one_paragraph(result: subprocess.CompletedProcess[str], words: list[str]) -> None:
    """Exit 2 and `error: ...` as the whole of stderr, one paragraph holding every word."""
    shown = result.stdout + result.stderr
    assert result.returncode == 2, shown
    assert "Traceback" not in shown, shown
    assert not PREFECT_LOG_LINE.search(shown), shown
    text = result.stderr.strip()
    if text.startswith("Usage:"):
        # A command-line usage error: Typer's own box, naming the option and the bound.
        assert "Invalid value for" in text, shown
    else:
        assert text.startswith("error: ") and "\n\n" not in text, shown
    for word in words:
        assert word in text, (word, text)


def test_every_subcommand_has_a_bad_input_case() -> None:
    shown = subprocess.run([JUDGELINE, "--help"], capture_output=True, text=True, check=True)
    box = shown.stdout.split("Commands")[1]
    commands = set(re.findall(r"^│ ([a-z][a-z-]*) {2,}", box, re.MULTILINE))
    assert commands == set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("command", list(CASES))
def test_bad_input_is_one_paragraph(command: str, bad_inputs: Path) -> None:
    case = CASES[command]
    result = judgeline(bad_inputs, case)
    assert_one_paragraph(result, [w.format(d=bad_inputs) for w in case.words])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EDGE_CASES))
def test_edge_case_is_one_paragraph(name: str, bad_inputs: Path) -> None:
    case = EDGE_CASES[name]
    result = judgeline(bad_inputs, case)
    assert_one_paragraph(result, [w.format(d=bad_inputs) for w in case.words])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(KNOWN_GAPS))
def test_known_gap_is_one_paragraph(name: str, bad_inputs: Path) -> None:
    case, gap = KNOWN_GAPS[name]
    result = judgeline(bad_inputs, case)
    if "Traceback" in result.stderr:
        pytest.xfail(gap)
    assert_one_paragraph(result, [w.format(d=bad_inputs) for w in case.words])


@pytest.mark.slow
def test_runs_lists_healthy_runs_and_warns_of_a_damaged_record(bad_inputs: Path) -> None:
    """A record that cannot be read (here a folder) is listed as damaged with a warning
    naming it; the healthy runs are listed as usual."""
    work = bad_inputs / "folder_record"
    result = judgeline(bad_inputs, Case(("runs",), (), work=str(work)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "r2" in result.stdout and "completed" in result.stdout
    assert "r1" in result.stdout and "damaged" in result.stdout
    assert result.stderr.startswith("warning: ")
    assert str(work / "runs" / "r1" / "record.json") in result.stderr


@pytest.mark.slow
def test_debug_shows_the_traceback_of_a_failed_task(bad_inputs: Path) -> None:
    """replay refuses its input: --debug shows where."""
    result = judgeline(bad_inputs, CASES["replay"], "--debug")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback (most recent call last)" in result.stderr
    assert "tasks.errors.InputError: " in result.stderr
    assert "not a replay input" in result.stderr
