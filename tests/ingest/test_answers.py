"""Answers tables (one row per question and system) into pairs with trusted systems."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from schemas.config import DatasetSpec
from tasks.errors import InputError
from tasks.ingest.answers import read_answers
from tasks.ingest.sources import freeze_sources
from tasks.store.workdir import WorkDir

SYSTEMS = ("base", "m1", "m2", "m3")


def _rows(questions: int = 3, systems: tuple[str, ...] = SYSTEMS) -> list[dict[str, Any]]:
    return [
        {"question_id": f"q{q}", "question": f"What is {q}?", "system": s, "answer": f"{s}: {q}"}
        for q in range(questions)
        for s in systems
    ]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def test_each_system_meets_the_baseline_on_every_question(tmp_path: Path) -> None:
    loaded = read_answers(_write(tmp_path / "a.jsonl", _rows()), baseline="base")
    assert len(loaded.pairs) == 3 * 3
    for pair in loaded.pairs:
        meta = json.loads(pair.metadata)
        assert meta["model_b"] == "base" and meta["role_b"] == "baseline"
        assert pair.answer_a == f"{meta['model_a']}: {meta['question_id'][1:]}"
        assert pair.answer_b == f"base: {meta['question_id'][1:]}"
        assert pair.key is None and pair.dataset == "a"
    assert {json.loads(p.metadata)["model_a"] for p in loaded.pairs} == {"m1", "m2", "m3"}


def test_round_robin_pairs_every_two_systems(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.jsonl", _rows())
    loaded = read_answers(path, baseline="base", pairs="round-robin")
    assert len(loaded.pairs) == 3 * 6
    matchups = {
        (json.loads(p.metadata)["model_a"], json.loads(p.metadata)["model_b"]) for p in loaded.pairs
    }
    assert len(matchups) == 6 and all(a < b for a, b in matchups)


def test_the_systems_are_part_of_the_manifest_hash(tmp_path: Path, work: WorkDir) -> None:
    rows = _rows()
    first = freeze_sources(
        [{"kind": "answers", "path": str(_write(tmp_path / "a.jsonl", rows)), "baseline": "base"}],
        work,
    )
    renamed = [dict(r, system="m9") if r["system"] == "m3" else r for r in rows]
    second = freeze_sources(
        [
            {
                "kind": "answers",
                "path": str(_write(tmp_path / "a.jsonl", renamed)),
                "baseline": "base",
            }
        ],
        work,
    )
    assert first.info.manifest_hash != second.info.manifest_hash


@pytest.mark.parametrize(
    ("change", "baseline", "words"),
    [
        (lambda rows: rows[:-1], "base", ["'m3' lacks 1 ('q2')", "miss answers"]),
        (lambda rows: rows, "gpt", ["baseline 'gpt' is not one of the table's systems", "'m1'"]),
        (lambda rows: rows, "BASE", ["did you mean 'base'?"]),
        (lambda rows: [*rows, rows[5]], "base", ["question 'q1', system 'm1' (rows 6, 13)"]),
        (
            lambda rows: [dict(r, system="M2") if r is rows[2] else r for r in rows],
            "base",
            ["differ only in case: 'M2' vs 'm2'"],
        ),
        (
            lambda rows: [dict(r, question="other") if r is rows[1] else r for r in rows],
            "base",
            ["question 'q0' has a different question text on row 2 than on row 1"],
        ),
    ],
    ids=["missing-answer", "no-baseline", "baseline-case", "duplicate", "case-clash", "two-texts"],
)
def test_bad_tables_are_one_paragraph_and_nothing_is_written(
    tmp_path: Path, change: Any, baseline: str, words: list[str]
) -> None:
    path = _write(tmp_path / "bad.jsonl", change(_rows()))
    work = tmp_path / "work"
    result = CliRunner().invoke(
        app, ["--work-dir", str(work), "freeze", "--answers", str(path), "--baseline", baseline]
    )
    assert isinstance(result.exception, InputError), result.output
    message = str(result.exception)
    assert message.startswith(str(path)) and "\n" not in message
    for word in words:
        assert word in message
    assert not (work / "manifests").exists()


def test_answers_datasets_name_their_baseline() -> None:
    spec = DatasetSpec(kind="answers", path="a.jsonl", baseline="base", pairs="round-robin")
    assert spec.model_dump()["baseline"] == "base"
    with pytest.raises(ValueError, match="needs a baseline"):
        DatasetSpec(kind="answers", path="a.jsonl")
    with pytest.raises(ValueError, match="only apply to an answers dataset"):
        DatasetSpec(kind="demo", baseline="base")


def test_a_run_refuses_a_bad_answers_table_before_anything_starts(
    tmp_path: Path, work: WorkDir
) -> None:
    from schemas.config import RunConfig
    from schemas.judge import JudgeSpec
    from tasks.runs.preflight import check_run

    path = _write(tmp_path / "a.jsonl", _rows()[:-1])
    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:9/v1", model="m")
    config = RunConfig(
        name="n", datasets=[DatasetSpec(kind="answers", path=str(path), baseline="base")],
        judges=[judge], k=2,
    )  # fmt: skip
    with pytest.raises(InputError, match="'m3' lacks 1"):
        check_run(config, work, "r1")
    assert not (work.root / "runs").exists()


def _csv(path: Path, questions: int) -> Path:
    """An answers table in the shape of a large leaderboard's: four systems, short texts."""
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("question_id,question,system,answer\n")
        for q in range(questions):
            for s in SYSTEMS:
                out.write(f"q{q:06d},What is {q} plus {q % 97}?,{s},The answer of {s} is {q}.\n")
    return path


def test_freezing_an_answers_table_holds_a_few_times_the_file_in_memory(
    tmp_path: Path, work: WorkDir
) -> None:
    """A 65 MB table of a million answers peaked at 3.9 GiB (60x the file): each pair was a
    pydantic model, then a dict, then a row dict, then a line of text, all at once. Python's
    own allocations while freezing (tracemalloc: Arrow's buffers are not counted) stay
    under 25x the file (17x); they were 47x. The whole of a 65 MB file: `bench/` has none,
    the figures are in the README."""
    import tracemalloc

    warm = _csv(tmp_path / "warm.csv", 2)  # the gate's imports are not the freeze's memory
    freeze_sources([{"kind": "answers", "path": str(warm), "baseline": "base"}], work)
    path = _csv(tmp_path / "answers.csv", 5_000)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        frozen = freeze_sources([{"kind": "answers", "path": str(path), "baseline": "base"}], work)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert frozen.info.pairs == 5_000 * 3
    assert peak < 25 * size, f"{peak / size:.0f}x the file"


def test_an_answer_past_every_judge_is_kept_and_warned_of(
    tmp_path: Path, work: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    """A 50 MB answer was frozen without a word though no judge takes such a prompt."""
    from tasks.ingest.validation import LONGEST_PROMPT_TOKENS

    rows = _rows(2)
    rows[5]["answer"] = "x" * (4 * LONGEST_PROMPT_TOKENS + 8)  # q1, m1: the file's row 6
    path = _write(tmp_path / "a.jsonl", rows)
    with caplog.at_level("WARNING"):
        frozen = freeze_sources([{"kind": "answers", "path": str(path), "baseline": "base"}], work)
    assert frozen.info.pairs == 6
    [warning] = [w for w in frozen.warnings if "longer than any judge takes" in w]
    tokens = sum(len(rows[i][f]) for i, f in ((5, "question"), (5, "answer"), (4, "answer"))) // 4
    assert f"{path}, row 6 (pair 'q1:m1:base', ~{tokens:,} tokens)" in warning
    assert "1 pair is longer" in warning and "\n" not in warning
    assert warning in caplog.text


@pytest.mark.parametrize("command", [["estimate"], ["run", "--dry-run"]])
def test_an_estimate_reads_an_answers_dataset_as_a_run_does(
    tmp_path: Path, command: list[str]
) -> None:
    """`estimate` and `run --dry-run` read an answers dataset with its baseline and pairing."""
    _write(tmp_path / "a.jsonl", _rows())
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: n\nk: 2\n"
        "judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}]\n"
        "datasets: [{kind: answers, path: a.jsonl, baseline: base, pairs: round-robin}]\n",
        "utf-8",
    )
    work = tmp_path / "work"
    result = CliRunner().invoke(app, ["--work-dir", str(work), command[0], str(path), *command[1:]])
    assert result.exit_code == 0, result.output
    planned = 3 * 6 * 2 * 2  # questions x matchups x K x orders
    assert f" {planned} " in result.output, result.output
    assert not [p for p in work.rglob("*") if p.is_file()]  # nothing frozen or planned
