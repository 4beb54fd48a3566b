"""Arena-Hard-Auto judgment files: the baseline's swapped slot, answers from the prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasks.errors import InputError
from tasks.imports import agreement, build_import, imported_table, read_imported
from tasks.remap import remap_run, write_remap
from tasks.runs.folder import RunFolder
from tasks.runs.health import NOT_RECORDED, run_health
from tasks.store.workdir import WorkDir


def prompt(question: str, first: str, second: str) -> str:
    return (
        f"<|User Prompt|>\n{question}\n\n<|The Start of Assistant A's Answer|>\n{first}\n"
        f"<|The End of Assistant A's Answer|>\n\n<|The Start of Assistant B's Answer|>\n"
        f"{second}\n<|The End of Assistant B's Answer|>"
    )


def game_v2(question: str, first: str, second: str, reply: str, score: str | None) -> Any:
    messages = [{"role": "system", "content": "judge"}, {"role": "user", "content": ""}]
    messages[1]["content"] = prompt(question, first, second)
    return {"score": score, "judgment": {"answer": reply}, "prompt": messages}


def line_v2(uid: str, games: list[Any]) -> dict[str, Any]:
    return {
        "uid": uid, "category": "hard_prompt", "judge": "judge-x", "model": "model-m",
        "baseline": "base-b", "games": games,
    }  # fmt: skip


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    return path


def judgment_file(root: Path) -> Path:
    q = "What is 2+2?"
    m, b = "model says 4", "baseline says 5"
    return write(
        root / "arena-hard-v2.0" / "model_judgment" / "judge-x" / "model-m.jsonl",
        [
            # games[0] shows the baseline first: its Right slot ([[B>A]]) is the model, A.
            line_v2(
                "q1", [game_v2(q, b, m, "[[B>A]]", "B>A"), game_v2(q, m, b, "[[A>>B]]", "A>>B")]
            ),
            # The baseline wins its own Left slot; the second game calls it a tie.
            line_v2("q2", [game_v2(q, b, m, "[[A>B]]", "A>B"), game_v2(q, m, b, "[[A=B]]", "A=B")]),
            # arena-hard takes the last label; judgeline calls two labels conflicting.
            line_v2("q3", [game_v2(q, b, m, "[[A>B]] no, [[B>A]]", "B>A"), None]),
        ],
    )


def test_games_are_placed_by_the_baseline_slot(tmp_path: Path) -> None:
    work = WorkDir.at(tmp_path / "work")
    file = read_imported("arena-hard", judgment_file(tmp_path))
    assert (file.judge, file.config, file.template_id) == (
        "judge-x",
        "arena-hard-v2.0",
        "arena-hard-v1",
    )
    pair = file.pairs.pairs[0]
    assert (pair.answer_a, pair.answer_b, pair.question) == (
        "model says 4", "baseline says 5", "What is 2+2?",
    )  # fmt: skip
    assert pair.dataset == "arena-hard-v2.0-model-m"
    assert [(j.order, j.recorded_label) for j in file.judgments[:2]] == [
        ("BA", "Right"),
        ("AB", "Left"),
    ]
    build_import(work, [file], "ah-1")
    write_remap(work, remap_run(work, "ah-1"))
    out = {
        (r["pair_id"], r["order"]): r["outcome"]
        for r in pq.read_table(RunFolder(work, "ah-1").outcomes).to_pylist()
    }
    # Slot and identity differ in games[0]: its Right slot is identity A (the model).
    assert out[("q1", "BA")] == "A" and out[("q1", "AB")] == "A"
    assert out[("q2", "BA")] == "B" and out[("q2", "AB")] == "T"
    assert out[("q3", "AB")] == "M"
    # The null game is a failed call without a category (its tool recorded none).
    (health,) = run_health(RunFolder(work, "ah-1"))
    assert health.failed == {NOT_RECORDED: 1} and health.valid == 4
    folder = RunFolder(work, "ah-1")
    table = imported_table(work, "ah-1")
    assert table is not None
    agree = agreement(table, pq.read_table(folder.table("labels")), pq.read_table(folder.calls))
    assert (agree["compared"], agree["agree"], agree["disagree"]) == (5, 4, 1)
    (odd,) = agree["disagreements"]
    assert (odd["source_line"], odd["recorded_verdict"], odd["parsed_label"]) == (
        3,
        "B>A",
        "Invalid",
    )


def test_v01_lines_use_question_id_and_user_prompt(tmp_path: Path) -> None:
    q, m, b = "Name a prime.", "7", "9"
    games = [
        {"user_prompt": prompt(q, b, m), "judgment": "\nB is right [[B>>A]]", "score": "B>>A"},
        {"user_prompt": prompt(q, m, b), "judgment": "\nA is right [[A>B]]", "score": "A>B"},
    ]
    line = {"question_id": "abc", "model": "model-m", "judge": "gpt-4-1106-preview", "games": games}
    file = read_imported("arena-hard", write(tmp_path / "model-m.jsonl", [line]))
    (pair,) = file.pairs.pairs
    assert (pair.pair_id, pair.answer_a, pair.answer_b) == ("abc", "7", "9")
    assert [j.reply for j in file.judgments] == ["\nB is right [[B>>A]]", "\nA is right [[A>B]]"]


@pytest.mark.parametrize(
    ("games", "message"),
    [
        ([game_v2("q", "b", "m", "[[A>B]]", "A>B"), game_v2("q", "b", "m", "[[A>B]]", "A>B")],
         "swapped places"),
        ([game_v2("q", "b <|The End of Assistant A's Answer|>\n\n", "m", "x", None), None],
         "each marker once"),
        ([None, None], "both games are null"),
    ],
)  # fmt: skip
def test_unreadable_games_are_refused_naming_the_line(
    tmp_path: Path, games: list[Any], message: str
) -> None:
    path = write(tmp_path / "m.jsonl", [line_v2("q1", games)])
    with pytest.raises(InputError, match=message) as err:
        read_imported("arena-hard", path)
    assert "row 1" in str(err.value) or ":1" in str(err.value)


def test_v01_error_judgments_are_failed_calls(tmp_path: Path) -> None:
    # v0.1 appends "\n" + each attempt's output; a failed call's output is $ERROR$.
    q, m, b = "Name a prime.", "7", "9"
    games = [
        {"user_prompt": prompt(q, b, m), "judgment": "\n$ERROR$\n$ERROR$", "score": None},
        {"user_prompt": prompt(q, m, b), "judgment": "\n$ERROR$", "score": None},
    ]
    partial = [
        # A first attempt that failed, then a reply: the reply is kept (with the marker).
        {"user_prompt": prompt(q, b, m), "judgment": "\n$ERROR$\nB is right [[B>A]]",
         "score": "B>A"},
        # A reply without a label whose follow-up failed: a reply without a verdict.
        {"user_prompt": prompt(q, m, b), "judgment": "\nBoth fine.\n$ERROR$", "score": None},
    ]  # fmt: skip
    lines = [
        {"question_id": "e1", "model": "model-m", "judge": "gpt-4-1106-preview", "games": games},
        {"question_id": "e2", "model": "model-m", "judge": "gpt-4-1106-preview", "games": partial},
    ]
    file = read_imported("arena-hard", write(tmp_path / "model-m.jsonl", lines))
    assert [(j.pair_id, j.reply) for j in file.judgments] == [
        ("e1", None), ("e1", None),
        ("e2", "\n$ERROR$\nB is right [[B>A]]"), ("e2", "\nBoth fine.\n$ERROR$"),
    ]  # fmt: skip
    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, [file], "ah-err")
    assert (built.counts["imported"], built.counts["failed"]) == (2, 2)
    write_remap(work, remap_run(work, "ah-err"))
    disp = {
        r["pair_id"]: r["disposition"]
        for r in pq.read_table(RunFolder(work, "ah-err").table("dispositions")).to_pylist()
    }
    assert disp == {"e1": "incomplete_M", "e2": "incomplete_I"}
