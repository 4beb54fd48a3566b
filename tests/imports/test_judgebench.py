"""JudgeBench output files: swapped-order bookkeeping, agreement, repeats as seeds, reparse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasks.errors import InputError
from tasks.imports import agreement, build_import, check_files, imported_table, read_imported
from tasks.judging.cache import read_replies
from tasks.remap import remap_run, write_remap
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

NAME = "dataset=judgebench,response_model=m1,judge_name=arena_hard,judge_model=judge-x.jsonl"


def _entry(reply: str | None, decision: str | None) -> dict[str, Any] | None:
    if reply is None:
        return None
    judgment = {"judge_model": "judge-x", "prompt": "…", "response": reply}
    return {"judgment": judgment, "decision": decision}


def _line(pair_id: str, label: str, first: Any, second: Any) -> dict[str, Any]:
    return {
        "pair_id": pair_id, "original_id": None, "source": "mmlu-pro-math",
        "question": f"question {pair_id}", "response_model": "m1",
        "response_A": f"answer A of {pair_id}", "response_B": f"answer B of {pair_id}",
        "label": label, "judge_name": "arena_hard", "judgments": [first, second],
    }  # fmt: skip


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    return path


def _file(tmp_path: Path, name: str = NAME) -> Path:
    return _write(
        tmp_path / name,
        [
            # The swapped judgment prefers its Right slot, which holds identity A: stable A.
            _line("p-swap", "A>B", _entry("\nA wins [[A>B]]", "A>B"), _entry("[[B>A]]", "B>A")),
            # The Left slot twice: A then B, an order conflict.
            _line("p-left", "B>A", _entry("[[A>>B]]", "A>B"), _entry("[[A>B]]", "A>B")),
            # The file says A>B but the reply holds B>A: a disagreement; second call failed.
            _line("p-odd", "B>A", _entry("[[B>A]]", "A>B"), None),
        ],
    )


def _outcomes(work: WorkDir, run_id: str) -> dict[tuple[str, int, str], str]:
    rows = pq.read_table(RunFolder(work, run_id).outcomes).to_pylist()
    return {(r["pair_id"], r["seed"], r["order"]): r["outcome"] for r in rows}


def test_swapped_second_judgment_maps_to_identities(tmp_path: Path) -> None:
    work = WorkDir.at(tmp_path / "work")
    file = read_imported("judgebench", _file(tmp_path))
    assert (file.judge, file.config, file.template_id) == ("judge-x", "arena_hard", "arena-hard-v1")
    built = build_import(work, [file], "run-1")
    result = remap_run(work, "run-1")
    write_remap(work, result)
    out = _outcomes(work, "run-1")
    # Slots and identities differ in the swapped call: Right there is identity A.
    assert out[("p-swap", 0, "AB")] == "A" and out[("p-swap", 0, "BA")] == "A"
    assert out[("p-left", 0, "AB")] == "A" and out[("p-left", 0, "BA")] == "B"
    assert out[("p-odd", 0, "AB")] == "B" and out[("p-odd", 0, "BA")] == "M"
    disp = {
        r["pair_id"]: r["disposition"]
        for r in pq.read_table(RunFolder(work, "run-1").table("dispositions")).to_pylist()
    }
    assert disp == {"p-swap": "stable_A", "p-left": "order_conflict", "p-odd": "incomplete_M"}
    assert built.counts == {
        "planned": 6, "stored": 5, "failed": 1, "sent": 0, "imported": 5, "not_in_files": 0,
    }  # fmt: skip

    folder = RunFolder(work, "run-1")
    table = imported_table(work, "run-1")
    assert table is not None
    agree = agreement(table, pq.read_table(folder.table("labels")), pq.read_table(folder.calls))
    assert (agree["compared"], agree["agree"], agree["disagree"]) == (5, 4, 1)
    (odd,) = agree["disagreements"]
    assert (odd["source_line"], odd["recorded_label"], odd["parsed_label"]) == (3, "Left", "Right")

    replies = read_replies(work)
    assert set(replies.column("provider").to_pylist()) == {"imported:judgebench"}
    assert set(pq.read_table(folder.calls).column("status").to_pylist()) == {"stored", "failed"}


def test_repeated_files_are_seeds(tmp_path: Path) -> None:
    work = WorkDir.at(tmp_path / "work")
    first = _file(tmp_path)
    (tmp_path / "again").mkdir()
    second = _write(
        tmp_path / "again" / NAME,
        [
            _line("p-swap", "A>B", _entry("[[A>B]]", "A>B"), _entry("[[A>B]]", "A>B")),
            _line("p-left", "B>A", _entry("[[B>A]]", "B>A"), _entry("[[A>B]]", "A>B")),
            _line("p-odd", "B>A", _entry("[[B>A]]", "B>A"), _entry("[[A>B]]", "A>B")),
        ],
    )
    files = [read_imported("judgebench", p) for p in (first, second)]
    built = build_import(work, files, "run-2")
    assert built.k == 2
    write_remap(work, remap_run(work, "run-2"))
    out = _outcomes(work, "run-2")
    assert out[("p-swap", 1, "AB")] == "A" and out[("p-swap", 1, "BA")] == "B"
    assert out[("p-odd", 1, "BA")] == "B"
    assert len(out) == 12


def test_files_of_other_pairs_are_refused(tmp_path: Path) -> None:
    work = WorkDir.at(tmp_path / "work")
    (tmp_path / "b").mkdir()
    other = _write(
        tmp_path / "b" / NAME,
        [_line("p-new", "A>B", _entry("[[A>B]]", "A>B"), _entry("[[A>B]]", "A>B"))],
    )
    files = [read_imported("judgebench", p) for p in (_file(tmp_path), other)]
    with pytest.raises(InputError, match="p-new"):
        build_import(work, files, "run-3")


def test_unknown_judge_names_the_line(tmp_path: Path) -> None:
    line = _line("p", "A>B", _entry("[[A>B]]", "A>B"), None) | {"judge_name": "pandalm"}
    path = _write(tmp_path / NAME, [line])
    with pytest.raises(InputError, match="pandalm") as err:
        read_imported("judgebench", path)
    assert "row 1" in str(err.value) or ":1" in str(err.value)


def test_an_unreadable_recorded_decision_keeps_the_reply(tmp_path: Path) -> None:
    # JudgeBench records whatever its regex [AB<>=]+ matched, e.g. 'A>A' (minimax-m2.1).
    path = _write(
        tmp_path / NAME,
        [
            _line("p1", "A>B", _entry("[[A>B]]", "A>B"), _entry("Hmm [[A>A]]", "A>A")),
            _line("p2", "B>A", _entry("[[B>A]]", "B>A"), _entry("[[A>B]]", ">")),
        ],
    )
    file = read_imported("judgebench", path)
    got = [(j.pair_id, j.order, j.reply, j.recorded_verdict, j.recorded_label)
           for j in file.judgments]  # fmt: skip
    assert got == [
        ("p1", "AB", "[[A>B]]", "A>B", "Left"),
        ("p1", "BA", "Hmm [[A>A]]", "A>A", None),
        ("p2", "AB", "[[B>A]]", "B>A", "Right"),
        ("p2", "BA", "[[A>B]]", ">", None),
    ]


def test_a_decision_that_is_not_text_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / NAME, [_line("p1", "A>B", _entry("[[A>B]]", "A>B"), None)])
    lines = path.read_text("utf-8").replace('"decision": "A>B"', '"decision": 3')
    path.write_text(lines, "utf-8")
    with pytest.raises(InputError, match=r"judgments\[0\]\.decision.*string or null") as err:
        read_imported("judgebench", path)
    assert "row 1" in str(err.value) or ":1" in str(err.value)


def test_the_same_file_twice_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path)
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / NAME
    copy.write_bytes(path.read_bytes())
    files = [read_imported("judgebench", p) for p in (path, copy)]
    with pytest.raises(InputError) as err:
        check_files(files)
    message = str(err.value)
    assert "\n" not in message
    assert str(copy) in message and str(path) in message and files[0].sha256[:12] in message
    with pytest.raises(InputError, match="same file"):
        check_files([files[0], files[0]])


def test_repeated_runs_may_list_their_pairs_in_another_order(tmp_path: Path) -> None:
    first = _file(tmp_path)
    lines = first.read_text("utf-8").splitlines(keepends=True)
    (tmp_path / "again").mkdir()
    second = tmp_path / "again" / NAME
    second.write_text("".join(reversed(lines)), "utf-8")
    files = [read_imported("judgebench", p) for p in (first, second)]
    check_files(files)
    built = build_import(WorkDir.at(tmp_path / "work"), files, "run-4")
    assert built.k == 2 and built.counts["not_in_files"] == 0


@pytest.mark.slow
def test_a_renamed_file_is_refused_naming_the_dataset_and_the_option(tmp_path: Path) -> None:
    """The same pairs in another order under another file name used to be refused with "the
    pairs differ ... byte for byte", although only the dataset name (from the file name)
    differs: the message names the field, both values and `--dataset`, which imports it."""
    from typer.testing import CliRunner

    from flows.cli import app

    first = _file(tmp_path)
    lines = first.read_text("utf-8").splitlines(keepends=True)
    second = tmp_path / "run2.jsonl"
    second.write_text("".join(reversed(lines)), "utf-8")
    files = [read_imported("judgebench", p) for p in (first, second)]
    with pytest.raises(InputError) as caught:
        check_files(files)
    text = str(caught.value)
    assert "dataset of pair" in text and "'run2' here but 'judgebench-m1'" in text, text
    assert "--dataset NAME" in text and "byte for byte" not in text, text

    work = tmp_path / "work"
    base = ["--work-dir", str(work), "import", "judgebench", str(first), str(second)]
    refused = CliRunner().invoke(app, base)
    assert isinstance(refused.exception, InputError), refused.output
    assert "--dataset NAME" in str(refused.exception)
    named = CliRunner().invoke(app, [*base, "--dataset", "jb", "--run-id", "jb-2"])
    # Imported (degraded: the file holds a failed judgment), not refused.
    assert not isinstance(named.exception, InputError), named.output
    assert RunFolder(WorkDir.at(work), "jb-2").calls.is_file()


def test_other_pairs_are_named_with_the_field_that_differs(tmp_path: Path) -> None:
    first = _file(tmp_path)
    (tmp_path / "b").mkdir()
    changed = first.read_text("utf-8").replace("answer B of p-left", "answer B, edited")
    other = tmp_path / "b" / NAME
    other.write_text(changed, "utf-8")
    files = [read_imported("judgebench", p) for p in (first, other)]
    with pytest.raises(InputError, match="answer_b of pair p-left is 'answer B, edited' here"):
        check_files(files)
