"""FastChat MT-Bench pairwise judgments: g2 shows model_2 first; texts from the side files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasks.errors import InputError
from tasks.imports import ImportOptions, agreement, build_import, imported_table, read_seeds
from tasks.remap import remap_run, write_remap
from tasks.runfolder import RunFolder
from tasks.workdir import WorkDir
from tests.flows.test_hostile_input import run_main


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    return path


def answer(model: str, turns: list[str]) -> dict[str, Any]:
    choices = [{"index": 0, "turns": turns}]
    return {"question_id": 81, "answer_id": "x", "model_id": model, "choices": choices}


def judgment(turn: int, g1: tuple[str, str], g2: tuple[str, str]) -> dict[str, Any]:
    return {
        "question_id": 81, "model_1": "m-one", "model_2": "m-two",
        "g1_winner": g1[0], "g2_winner": g2[0], "judge": ["judge-x", "pair-v2"],
        "g1_user_prompt": "…", "g1_judgment": g1[1], "g2_user_prompt": "…",
        "g2_judgment": g2[1], "turn": turn, "tstamp": 0.0,
    }  # fmt: skip


def mt_bench(root: Path) -> tuple[Path, Path, Path]:
    data = root / "mt_bench"
    question = {"question_id": 81, "category": "writing", "turns": ["Q one?", "Q two?"]}
    questions = write(data / "question.jsonl", [question])
    write(data / "model_answer" / "m-one.jsonl", [answer("m-one", ["one-1", "one-2"])])
    write(data / "model_answer" / "m-two.jsonl", [answer("m-two", ["two-1", "two-2"])])
    pairs = write(
        data / "model_judgment" / "judge-x_pair.jsonl",
        [
            # g2 shows model_2 as Assistant A: its Left slot [[A]] is model_2, identity B.
            judgment(1, ("model_2", "B is better. [[B]]"), ("model_2", "A is better. [[A]]")),
            # A tie, then a failed call; then the file says model_1 where the reply says B.
            judgment(2, ("tie", "[[C]]"), ("error", "$ERROR$")),
        ],
    )
    return pairs, questions, data / "model_answer"


def test_second_game_shows_model_2_first(tmp_path: Path) -> None:
    path, questions, answers = mt_bench(tmp_path)
    (file,) = read_seeds(
        "fastchat", path, ImportOptions(questions=str(questions), answers_dir=str(answers))
    )
    assert (file.judge, file.template_id) == ("judge-x", "fastchat-pair-v2")
    first, second = file.pairs.pairs
    assert (first.question, first.answer_a, first.answer_b) == ("Q one?", "one-1", "two-1")
    assert second.question == "Q two?"
    conversation = "### User:\nQ one?\n\n### Assistant:\none-1\n\n### User:\nQ two?"
    assert second.answer_a == conversation + "\n\n### Assistant:\none-2"
    assert [(j.order, j.recorded_label) for j in file.judgments] == [
        ("AB", "Right"), ("BA", "Left"), ("AB", "Tie"), ("BA", None),
    ]  # fmt: skip
    work = WorkDir.at(tmp_path / "work")
    build_import(work, [file], "fc-1")
    write_remap(work, remap_run(work, "fc-1"))
    out = {
        (r["pair_id"], r["order"]): r["outcome"]
        for r in pq.read_table(RunFolder(work, "fc-1").outcomes).to_pylist()
    }
    # Slot and identity differ in g2: its Left slot is identity B (model_2).
    assert out[(first.pair_id, "AB")] == "B" and out[(first.pair_id, "BA")] == "B"
    assert out[(second.pair_id, "AB")] == "T" and out[(second.pair_id, "BA")] == "M"
    folder = RunFolder(work, "fc-1")
    table = imported_table(work, "fc-1")
    assert table is not None
    agree = agreement(table, pq.read_table(folder.table("labels")), pq.read_table(folder.calls))
    assert (agree["compared"], agree["agree"]) == (3, 3)


def test_a_recorded_winner_the_reply_contradicts_is_a_disagreement(tmp_path: Path) -> None:
    path, questions, answers = mt_bench(tmp_path)
    write(path, [judgment(1, ("model_1", "[[B]]"), ("model_1", "[[B]]"))])
    (file,) = read_seeds(
        "fastchat", path, ImportOptions(questions=str(questions), answers_dir=str(answers))
    )
    work = WorkDir.at(tmp_path / "work")
    build_import(work, [file], "fc-2")
    write_remap(work, remap_run(work, "fc-2"))
    folder = RunFolder(work, "fc-2")
    table = imported_table(work, "fc-2")
    assert table is not None
    agree = agreement(table, pq.read_table(folder.table("labels")), pq.read_table(folder.calls))
    # g1: file says model_1 (Left), the reply [[B]] is Right; g2: model_1 is Right, agreed.
    assert (agree["compared"], agree["agree"], agree["disagree"]) == (2, 1, 1)
    assert agree["disagreements"][0]["judgment"] == 0


def test_missing_question_or_answer_files_are_refused(tmp_path: Path) -> None:
    path, questions, answers = mt_bench(tmp_path)
    with pytest.raises(InputError, match="--questions .* --answers-dir"):
        read_seeds("fastchat", path, ImportOptions(answers_dir=str(answers)))
    (answers / "m-two.jsonl").unlink()
    with pytest.raises(InputError, match="m-two"):
        read_seeds(
            "fastchat", path, ImportOptions(questions=str(questions), answers_dir=str(answers))
        )


def test_cli_refuses_fastchat_without_its_text_files_in_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, _ = mt_bench(tmp_path)
    work = str(tmp_path / "w")
    result = run_main(monkeypatch, "--work-dir", work, "import", "fastchat", str(path))
    result.assert_one_paragraph(str(path), "--questions", "--answers-dir")
