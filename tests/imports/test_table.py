"""A generic judgments table: the shown-left column places each reply; seeds from a column."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.errors import InputError
from tasks.imports import ImportOptions, build_import, read_seeds
from tasks.judging.spend import run_prices
from tasks.remap import remap_run, write_remap
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

MAP = (
    "pair_id=id,question=q,answer_a=a,answer_b=b,reply=text,left=shown_left,seed=rep,"
    "verdict=v,metadata=lang"
)
HEADER = ["id", "q", "a", "b", "text", "shown_left", "rep", "v", "lang"]


def table(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerows(rows)
    return path


def pair(pid: str, reply: str, left: str, rep: str, verdict: str) -> list[str]:
    return [pid, f"question {pid}", f"A of {pid}", f"B of {pid}", reply, left, rep, verdict, "en"]


def test_left_column_and_seeds(tmp_path: Path) -> None:
    path = table(
        tmp_path / "judgments.csv",
        [
            # Identity B shown left, and the reply prefers Left: identity B.
            pair("p1", "[[A>B]]", "B", "7", "left"),
            pair("p1", "[[B>A]]", "A", "7", "Right"),
            pair("p1", "[[A=B]]", "A", "9", ""),
            pair("p1", "[[A>B]]", "B", "9", "Right"),
        ],
    )
    options = ImportOptions(mapping=MAP, judge="judge-x")
    files = read_seeds("table", path, options)
    assert len(files) == 2  # seeds 7 and 9 become run seeds 0 and 1
    (only,) = files[0].pairs.pairs
    assert json.loads(only.metadata) == {"lang": "en"}
    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, files, "tb-1")
    assert built.k == 2 and built.counts["imported"] == 4
    write_remap(work, remap_run(work, "tb-1"))
    out = {
        (r["seed"], r["order"]): r["outcome"]
        for r in pq.read_table(RunFolder(work, "tb-1").outcomes).to_pylist()
    }
    # Slot and identity differ where B was shown left: Left there is identity B.
    assert out == {(0, "BA"): "B", (0, "AB"): "B", (1, "AB"): "T", (1, "BA"): "B"}
    assert run_prices(work, "tb-1") == {"judge-x": None}  # an imported judge was not paid
    labels = [(j.recorded_verdict, j.recorded_label) for f in files for j in f.judgments]
    assert labels == [("left", "Left"), ("Right", "Right"), (None, None), ("Right", "Right")]


def test_order_column_and_null_reply_in_jsonl(tmp_path: Path) -> None:
    rows = [
        {"pid": "x", "q": "q", "a": "a", "b": "b", "reply": None, "order": "BA", "who": "j"},
        {"pid": "x", "q": "q", "a": "a", "b": "b", "reply": "[[B>A]]", "order": "ab", "who": "j"},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    spec = "pair_id=pid,question=q,answer_a=a,answer_b=b,reply=reply,order=order,judge=who"
    (file,) = read_seeds("table", path, ImportOptions(mapping=spec))
    assert file.judge == "j"
    assert [(j.order, j.reply) for j in file.judgments] == [("BA", None), ("AB", "[[B>A]]")]


@pytest.mark.parametrize(
    ("rows", "spec", "message"),
    [
        ([pair("p1", "x", "A", "0", ""), ["p1", "q", "A of p1", "B", "y", "B", "0", "", "en"]],
         MAP, "pair p1 has other texts than on row 1"),
        ([pair("p1", "x", "left", "0", "")], MAP, "left .column 'shown_left'. must be one of A, B"),
        ([pair("p1", "x", "A", "0", "A>B")], MAP, "verdict .column 'v'. must be Left"),
        ([pair("p1", "x", "A", "0", "")], MAP.replace("left=shown_left", "order=shown_left,left=x"),
         "exactly one of left"),
    ],
)  # fmt: skip
def test_bad_tables_are_refused(
    tmp_path: Path, rows: list[list[str]], spec: str, message: str
) -> None:
    path = table(tmp_path / "t.csv", rows)
    with pytest.raises(InputError, match=message):
        read_seeds("table", path, ImportOptions(mapping=spec, judge="j"))


def test_a_table_needs_a_judge_and_a_mapping(tmp_path: Path) -> None:
    path = table(tmp_path / "t.csv", [pair("p1", "x", "A", "0", "")])
    with pytest.raises(InputError, match="--judge"):
        read_seeds("table", path, ImportOptions(mapping=MAP))
    with pytest.raises(InputError, match="--map"):
        read_seeds("table", path, ImportOptions(judge="j"))


def test_a_table_without_verdicts_has_no_disagreements() -> None:
    """Nothing records a verdict: no comparison, not one "disagreement" per reply."""
    import pyarrow as pa

    from tasks.imports import agreement

    rows = [{"call_key": f"k{i}", "source_file": "t.csv", "source_line": i + 2, "judgment": i,
             "recorded_verdict": None, "recorded_label": None} for i in range(3)]  # fmt: skip
    labels = pa.Table.from_pylist(
        [{"call_key": f"k{i}", "label": "Left", "note": None} for i in range(3)]
    )
    calls = pa.Table.from_pylist([{"call_key": f"k{i}", "presentation_id": f"p{i}", "seed": 0,
                                   "status": "stored"} for i in range(3)])  # fmt: skip
    counts = agreement(pa.Table.from_pylist(rows), labels, calls)
    assert (counts["compared"], counts["disagree"]) == (0, 0)
    rows[1]["recorded_verdict"], rows[1]["recorded_label"] = "A>B", "Left"
    counts = agreement(pa.Table.from_pylist(rows), labels, calls)
    assert (counts["compared"], counts["agree"], counts["disagree"]) == (3, 1, 2)
