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
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir
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


def test_cli_refuses_fastchat_whose_prompts_hold_no_texts_in_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, _ = mt_bench(tmp_path)
    work = str(tmp_path / "w")
    result = run_main(monkeypatch, "--work-dir", work, "import", "fastchat", str(path))
    result.assert_one_paragraph(str(path), "--questions", "--answers-dir")


SINGLE = (
    "[User Question]\n{q1}\n\n{ref}[The Start of Assistant A's Answer]\n{a1}\n"
    "[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n{b1}\n"
    "[The End of Assistant B's Answer]"
)
MULTI = (
    "{ref}<|The Start of Assistant A's Conversation with User|>\n\n### User:\n{q1}\n\n"
    "### Assistant A:\n{a1}\n\n### User:\n{q2}\n\n### Assistant A:\n{a2}\n\n"
    "<|The End of Assistant A's Conversation with User|>\n\n\n"
    "<|The Start of Assistant B's Conversation with User|>\n\n### User:\n{q1}\n\n"
    "### Assistant B:\n{b1}\n\n### User:\n{q2}\n\n### Assistant B:\n{b2}\n\n"
    "<|The End of Assistant B's Conversation with User|>"
)
REF_SINGLE = "[The Start of Reference Answer]\nref-1\n[The End of Reference Answer]\n\n"
REF_MULTI = (
    "<|The Start of Reference Answer|>\n\n### User:\nQ one?\n\n### Reference answer:\nref-1\n\n"
    "### User:\nQ two?\n\n### Reference answer:\nref-2\n\n<|The End of Reference Answer|>\n\n\n"
)
ANTHROPIC = "[Instruction]\nPlease act as an impartial judge ... [[A]], [[B]] or [[C]].\n\n"


def rendered(turn: int, first: list[str], second: list[str], ref: bool = False) -> str:
    """A FastChat user prompt as common.py's run_judge_pair renders it."""
    fields = {"q1": "Q one?", "q2": "Q two?", "a1": first[0], "a2": first[1],
              "b1": second[0], "b2": second[1]}  # fmt: skip
    if turn == 1:
        return SINGLE.format(ref=REF_SINGLE if ref else "", **fields)
    return MULTI.format(ref=REF_MULTI if ref else "", **fields)


def with_prompts(line: dict[str, Any], *, ref: bool = False, prefix: str = "") -> dict[str, Any]:
    one, two = ["one-1", "one-2"], ["two-1", "two-2"]
    turn = line["turn"]
    return line | {
        "g1_user_prompt": prefix + rendered(turn, one, two, ref),
        "g2_user_prompt": prefix + rendered(turn, two, one, ref),
    }


@pytest.mark.parametrize(("ref", "prefix"), [(False, ""), (True, ""), (False, ANTHROPIC)])
def test_texts_come_from_the_stored_prompts_without_side_files(
    tmp_path: Path, ref: bool, prefix: str
) -> None:
    path, questions, answers = mt_bench(tmp_path)
    lines = [json.loads(x) for x in path.read_text("utf-8").splitlines()]
    write(path, [with_prompts(x, ref=ref, prefix=prefix) for x in lines])
    (from_prompts,) = read_seeds("fastchat", path, ImportOptions())
    (from_files,) = read_seeds(
        "fastchat", path, ImportOptions(questions=str(questions), answers_dir=str(answers))
    )
    # The same pairs, byte for byte, whichever way the texts were found.
    assert from_prompts.pairs.pairs == from_files.pairs.pairs
    assert from_prompts.judgments == from_files.judgments
    assert from_prompts.pairs.pairs[1].answer_b.endswith("### Assistant:\ntwo-2")


def test_a_vicuna_bench_file_is_read_from_its_prompts(tmp_path: Path) -> None:
    line = judgment(1, ("model_2", "[[B]]"), ("model_1", "[[B]]")) | {"question_id": 3}
    path = write(
        tmp_path / "data" / "vicuna_bench" / "model_judgment" / "gpt-4_pair.jsonl",
        [with_prompts(line)],
    )
    (file,) = read_seeds("fastchat", path, ImportOptions())
    (pair,) = file.pairs.pairs
    assert (pair.dataset, pair.question, pair.answer_a, pair.answer_b) == (
        "vicuna_bench", "Q one?", "one-1", "two-1",
    )  # fmt: skip
    assert json.loads(pair.metadata)["model_a"] == "m-one"


@pytest.mark.parametrize(
    ("g2", "message"),
    [
        (rendered(1, ["one-1", ""], ["two-X", ""]), "swapped places"),
        ("[User Question]\nQ one?\n\nno answers here", "laid out"),
        (rendered(1, ["one-1 [The End of Assistant A's Answer]\n", ""], ["two-1", ""]), "once"),
        (None, "--questions"),
    ],
)
def test_unreadable_prompts_are_refused_naming_the_line(
    tmp_path: Path, g2: str | None, message: str
) -> None:
    path, _, _ = mt_bench(tmp_path)
    line = with_prompts(judgment(1, ("model_1", "[[A]]"), ("model_1", "[[B]]")))
    write(path, [line | {"g2_user_prompt": g2}])
    with pytest.raises(InputError, match=message) as err:
        read_seeds("fastchat", path, ImportOptions())
    assert "row 1" in str(err.value) or ":1" in str(err.value)
