"""Freezing manifests: exact bytes, stable hashes, write-once storage, bad input, the gate."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import Pair
from tasks.errors import GateError, InputError, IntegrityError
from tasks.ingest.manifest import (
    MANIFEST_FILE,
    freeze_manifest,
    gate_manifest,
    list_manifests,
    read_manifest,
    resolve_manifest_hash,
)
from tasks.store.workdir import WorkDir

WEIRD_ANSWERS = [
    "naïve café — 日本語 🎉",
    "trailing spaces   ",
    "  leading and\ttabs\t",
    "windows\r\nline\r\nends\r\n",
    "old mac\rcarriage\rreturns",
    "e\u0301 (NFD) next to \u00e9 (NFC)",
    "\ufeffbom, zero\u200bwidth, rtl \u202eabc\u202c, family \U0001f468\u200d\U0001f469",
    "line\u2028separator\u2029paragraph \x0bvt \x0cff \x1fus",
    "\n\nnewlines around\n\n",
]


def make_pair(pair_id: str, **fields: Any) -> Pair:
    values: dict[str, Any] = {
        "dataset": "toy",
        "source": "unit",
        "question": f"Which is better for {pair_id}?",
        "answer_a": f"answer A of {pair_id}",
        "answer_b": f"answer B of {pair_id}",
        "key": "A",
    }
    values.update(fields)
    return Pair(pair_id=pair_id, **values)


def toy_pairs(n: int = 4) -> list[Pair]:
    return [make_pair(f"p{i}", key=("A", "B", None)[i % 3]) for i in range(n)]


def manifests_empty(work: WorkDir) -> bool:
    root = work.root / "manifests"
    return not root.exists() or not any(root.iterdir())


def test_exact_bytes_round_trip(work: WorkDir) -> None:
    pairs = [
        make_pair(f"w{i}", answer_a=text, answer_b=WEIRD_ANSWERS[-1 - i], question=text)
        for i, text in enumerate(WEIRD_ANSWERS)
    ]
    frozen = freeze_manifest([("weird.jsonl", pairs)], work)
    info, table = read_manifest(work, frozen.info.manifest_hash)
    stored = {row["pair_id"]: row for row in table.to_pylist()}
    assert info.pairs == len(pairs) == len(stored)
    for pair in pairs:
        row = stored[pair.pair_id]
        for name in ("question", "answer_a", "answer_b"):
            original = getattr(pair, name)
            assert row[name].encode("utf-8") == original.encode("utf-8"), (pair.pair_id, name)
        assert row["answer_a_sha256"] == hashlib.sha256(pair.answer_a.encode("utf-8")).hexdigest()
        assert row["answer_b_sha256"] == hashlib.sha256(pair.answer_b.encode("utf-8")).hexdigest()
    # The parquet file itself holds the bytes, not a normalised form.
    raw = pq.read_table(frozen.path / MANIFEST_FILE).column("answer_a").to_pylist()
    assert sorted(raw) == sorted(WEIRD_ANSWERS)


def test_freezing_twice_or_permuted_gives_the_same_hash_and_writes_nothing(work: WorkDir) -> None:
    pairs = toy_pairs(6)
    first = freeze_manifest([("a.jsonl", pairs)], work)
    assert not first.already_frozen
    before = (first.path / MANIFEST_FILE).read_bytes(), (first.path / "manifest.json").read_bytes()

    again = freeze_manifest([("a.jsonl", pairs)], work)
    permuted = freeze_manifest([("b.jsonl", pairs[3:][::-1]), ("c.jsonl", pairs[:3][::-1])], work)
    assert again.already_frozen and permuted.already_frozen
    assert again.info.manifest_hash == permuted.info.manifest_hash == first.info.manifest_hash
    after = (first.path / MANIFEST_FILE).read_bytes(), (first.path / "manifest.json").read_bytes()
    assert after == before
    assert [p.name for p in (work.root / "manifests").iterdir()] == [first.info.manifest_hash]


@pytest.mark.parametrize(
    "change",
    [
        {"answer_a": "answer A of p1 "},
        {"answer_b": "answer B of p1\r\n"},
        {"question": "Which is better for p1 ?"},
        {"rubric_revision": "r1"},
        {"key": "A"},  # p1 is keyed B
        {"reference": "ref"},
        {"answer_a": "answer A of p1".replace("A", "\u0391")},  # Greek capital alpha
    ],
)
def test_one_changed_byte_gives_a_new_manifest(work: WorkDir, change: dict[str, Any]) -> None:
    pairs = toy_pairs(3)
    original = freeze_manifest([("a", pairs)], work)
    changed = [p.model_copy(update=change) if p.pair_id == "p1" else p for p in pairs]
    other = freeze_manifest([("a", changed)], work)
    assert other.info.manifest_hash != original.info.manifest_hash
    assert not other.already_frozen
    assert len(list_manifests(work)) == 2
    # The original stays as it was.
    _, table = read_manifest(work, original.info.manifest_hash, gate=False)
    assert table.column("answer_a").to_pylist() == [p.answer_a for p in pairs]


def _rewrite_column(path: Path, column: str, row: int, value: Any) -> None:
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.column_names.index(column)
    table = table.set_column(index, table.schema.field(index), pa.array(values))
    pq.write_table(table, path)


def test_tampered_manifest_dir_is_an_integrity_error_and_is_not_overwritten(
    work: WorkDir,
) -> None:
    pairs = toy_pairs(4)
    frozen = freeze_manifest([("a", pairs)], work)
    path = frozen.path / MANIFEST_FILE
    row = pq.read_table(path).column("pair_id").to_pylist().index("p2")
    _rewrite_column(path, "answer_a", row, "answer A of p2!")
    tampered = path.read_bytes()

    with pytest.raises(IntegrityError, match=frozen.info.manifest_hash) as exc:
        freeze_manifest([("a", pairs)], work)
    assert "p2" in str(exc.value)
    assert path.read_bytes() == tampered


def test_tampered_answer_byte_is_rejected_by_the_gate_naming_the_pair(work: WorkDir) -> None:
    frozen = freeze_manifest([("a", toy_pairs(5))], work)
    path = frozen.path / MANIFEST_FILE
    row = pq.read_table(path).column("pair_id").to_pylist().index("p3")
    _rewrite_column(path, "answer_b", row, "answer B of p4")  # one character changed

    with pytest.raises(GateError) as exc:
        read_manifest(work, frozen.info.manifest_hash)
    message = str(exc.value)
    assert "answer_b_sha256" in message and "p3" in message
    assert "recomputed" in message  # the manifest hash no longer matches either


def test_tampered_sidecar_is_an_integrity_error(work: WorkDir) -> None:
    frozen = freeze_manifest([("a", toy_pairs(2))], work)
    sidecar = frozen.path / "manifest.json"
    data = json.loads(sidecar.read_text("utf-8"))
    data["manifest_hash"] = "0" * 64
    sidecar.write_text(json.dumps(data), "utf-8")
    with pytest.raises(IntegrityError, match="not the folder's name"):
        read_manifest(work, frozen.info.manifest_hash)


def _bad(pair_id: str, **fields: Any) -> Pair:
    """A pair that skips pydantic's checks, as a buggy loader could produce."""
    good = make_pair(pair_id).model_dump()
    good.update(fields)
    return Pair.model_construct(**good)


@pytest.mark.parametrize(
    ("sources", "file", "row", "words"),
    [
        (
            [("one.jsonl", [make_pair("p1"), make_pair("p2"), make_pair("p1")])],
            "one.jsonl",
            3,
            ["duplicate pair id 'p1'", "one.jsonl row 1"],
        ),
        (
            [("one.jsonl", [make_pair("p1"), make_pair("x")]), ("two.csv", [make_pair("x")])],
            "two.csv",
            1,
            ["duplicate pair id 'x'", "one.jsonl row 2"],
        ),
        ([("f", [make_pair("p1"), make_pair("p2", answer_a="")])], "f", 2, ["'p2'", "answer_a"]),
        ([("f", [make_pair("p2", answer_b=" \r\n\t ")])], "f", 1, ["answer_b", "whitespace"]),
        ([("f", [make_pair("p1"), _bad("p9", key="C")])], "f", 2, ["'p9'", "key 'C'"]),
        ([("f", [_bad("p5", answer_b=None)])], "f", 1, ["'p5'", "answer_b is missing"]),
        ([("f", [make_pair("p6", answer_a="bad \udc80 surrogate")])], "f", 1, ["answer_a"]),
        ([("f", [make_pair("p0"), {"pair_id": "p7", "key": "B"}])], "f", 2, ["dataset"]),
        ([("f", [make_pair("")])], "f", 1, ["pair_id is empty"]),
        ([("empty.jsonl", [])], "empty.jsonl", None, ["no pairs"]),
    ],
)
def test_bad_input_names_source_and_row_and_writes_nothing(
    work: WorkDir,
    sources: list[tuple[str, list[Any]]],
    file: str,
    row: int | None,
    words: list[str],
) -> None:
    with pytest.raises(InputError) as exc:
        freeze_manifest(sources, work)
    assert exc.value.file == file
    assert exc.value.row == row
    for word in words:
        assert word in str(exc.value)
    assert manifests_empty(work)


def test_several_problems_are_reported_together(work: WorkDir) -> None:
    pairs = [make_pair("p1", answer_a=""), make_pair("p2", answer_b=" "), make_pair("p1")]
    with pytest.raises(InputError) as exc:
        freeze_manifest([("f", pairs)], work)
    assert exc.value.row == 1
    assert "row 2" in str(exc.value) and "row 3" in str(exc.value)
    assert manifests_empty(work)


def test_rows_given_with_the_pairs_are_the_rows_errors_name(work: WorkDir) -> None:
    """A loader's rows (file lines, say, with blank lines between) replace the positions."""
    pairs = [make_pair("p1"), make_pair("p2"), make_pair("p3", answer_b=""), make_pair("p1")]
    with pytest.raises(InputError) as exc:
        freeze_manifest([("f.jsonl", pairs, [2, 5, 9, 12])], work)
    assert exc.value.file == "f.jsonl" and exc.value.row == 9
    message = str(exc.value)
    assert message.startswith("f.jsonl, row 9: pair 'p3': answer_b is empty")
    assert "f.jsonl, row 12: duplicate pair id 'p1': already at f.jsonl row 2" in message
    assert manifests_empty(work)


def test_rows_name_warnings_and_leave_the_manifest_unchanged(work: WorkDir) -> None:
    pairs = [*toy_pairs(3), make_pair("same", answer_a="42\n", answer_b="42\n")]
    plain = freeze_manifest([("f.jsonl", pairs)], work)
    with_rows = freeze_manifest([("f.jsonl", pairs, [3, 5, 8, 13])], work)
    assert with_rows.info.manifest_hash == plain.info.manifest_hash
    assert with_rows.already_frozen
    assert plain.warnings[0].startswith("f.jsonl, row 4: pair 'same'")
    assert with_rows.warnings[0].startswith("f.jsonl, row 13: pair 'same'")


def test_rows_must_be_one_per_pair(work: WorkDir) -> None:
    with pytest.raises(ValueError, match="2 pairs but 1 rows"):
        freeze_manifest([("f.jsonl", toy_pairs(2), [1])], work)
    assert manifests_empty(work)


def test_identical_answers_warn_and_are_kept(
    work: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    pairs = [make_pair("p1"), make_pair("same", answer_a="42\n", answer_b="42\n")]
    with caplog.at_level(logging.WARNING, logger="tasks.ingest.manifest"):
        frozen = freeze_manifest([("f.jsonl", pairs)], work)
    assert len(frozen.warnings) == 1 and "'same'" in frozen.warnings[0]
    assert "f.jsonl, row 2" in frozen.warnings[0]
    assert any("'same'" in r.getMessage() for r in caplog.records)
    assert frozen.info.identical_answer_pairs == ["same"]
    _, table = read_manifest(work, frozen.info.manifest_hash)
    assert "same" in table.column("pair_id").to_pylist()


def test_sidecar_counts(work: WorkDir) -> None:
    pairs = [*toy_pairs(5), make_pair("q", dataset="other", key=None)]
    frozen = freeze_manifest([("x", pairs[:2]), ("y", pairs[2:])], work)
    info = frozen.info
    assert info.pairs == 6
    assert info.datasets == {"other": 1, "toy": 5}
    assert info.keys == {"A": 2, "B": 2, "none": 2}
    assert info.sources == ["x", "y"]
    assert [m.manifest_hash for m in list_manifests(work)] == [info.manifest_hash]


@pytest.fixture(scope="module")
def stored_table(tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    work = WorkDir(tmp_path_factory.mktemp("gate") / "work")
    frozen = freeze_manifest([("a", toy_pairs(4))], work)
    return read_manifest(work, frozen.info.manifest_hash)[1]


@pytest.mark.parametrize(
    ("column", "row", "value", "says"),
    [
        ("key", 1, "C", "key is A, B or empty"),
        ("pair_id", 2, "p0", "pair ids are unique"),
        ("answer_a", 0, "   ", "answer A is not empty"),
        ("answer_b_sha256", 3, "0" * 64, "answer_b_sha256 equals"),
        ("question", 2, "edited question", "recomputed from the rows"),
    ],
)
def test_gate_rejects_each_broken_rule(
    stored_table: pa.Table, column: str, row: int, value: Any, says: str
) -> None:
    table = stored_table
    gate_manifest(table)  # intact: passes
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.column_names.index(column)
    broken = table.set_column(index, table.schema.field(index), pa.array(values))
    with pytest.raises(GateError, match=says):
        gate_manifest(broken)


def test_hash_prefixes_and_absent_manifests(work: WorkDir) -> None:
    one = freeze_manifest([("a", toy_pairs(2))], work).info.manifest_hash
    two = freeze_manifest([("a", toy_pairs(3))], work).info.manifest_hash
    assert resolve_manifest_hash(work, one[:12]) == one
    assert resolve_manifest_hash(work, two.upper()) == two
    # A folder whose name shares one's first 8 digits makes that prefix ambiguous.
    twin = one[:8] + ("0" if one[8] != "0" else "1") + one[9:]
    (work.root / "manifests" / twin).mkdir()
    with pytest.raises(InputError, match="ambiguous"):
        resolve_manifest_hash(work, one[:8])
    assert resolve_manifest_hash(work, one[:9]) == one
    with pytest.raises(InputError, match="no manifest"):
        resolve_manifest_hash(work, "zz")
    absent = "f" * 64 if not one.startswith("f") else "e" * 64
    with pytest.raises(InputError, match=absent):
        read_manifest(work, absent)
    with pytest.raises(InputError, match="not a manifest hash"):
        read_manifest(work, "../plans")


def test_freezes_real_judgebench_pairs_byte_for_byte(work: WorkDir, shared_data: Path) -> None:
    from tasks.ingest.loaders import load_source

    path = shared_data / "judgebench" / "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
    pairs = load_source("judgebench", path)
    frozen = freeze_manifest([(str(path), pairs)], work)
    assert frozen.info.pairs == 350
    assert frozen.info.keys == {"A": 193, "B": 157}
    _, table = read_manifest(work, frozen.info.manifest_hash)
    stored = {r["pair_id"]: r for r in table.to_pylist()}
    with path.open("rb") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    by_answers = {(r["response_A"], r["response_B"]) for r in records}
    assert {(r["answer_a"], r["answer_b"]) for r in stored.values()} == by_answers


def test_many_identical_answer_pairs_log_one_summary_line(
    work: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    same = [make_pair(f"s{i}", answer_a="42\n", answer_b="42\n") for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="tasks.ingest.manifest"):
        frozen = freeze_manifest([("f.jsonl", [make_pair("p1"), *same])], work)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("3 pairs have byte-identical answers A and B (kept)")
    assert "f.jsonl, row 2: pair 's0'" in line
    assert len(frozen.warnings) == 3
    assert frozen.info.identical_answer_pairs == ["s0", "s1", "s2"]
