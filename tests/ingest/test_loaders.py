"""Loaders against the real JudgeBench and RM-Bench files and small hand-written tables."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import Pair
from tasks.errors import InputError
from tasks.ingest.loaders import (
    KINDS,
    load_judgebench,
    load_rmbench,
    load_source,
    read_judgebench,
    read_rmbench,
    read_source,
)
from tasks.ingest.tables import ColumnMapping, LoadedPairs, load_table, read_table

GPT4O = "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
CLAUDE = "dataset=judgebench,response_model=claude-3-5-sonnet-20240620.jsonl"
JUDGED = (
    "dataset=judgebench,response_model=gpt-4o-2024-05-13,"
    "judge_name=arena_hard,judge_model=o1-mini-2024-09-12.jsonl"
)
STYLES = ("concise", "detailed_plain", "detailed_markdown")


def raw_jsonl(path: Path) -> list[dict]:
    """The file's records through `json.loads` of each raw line, nothing else in between."""
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]


# --- JudgeBench ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "dataset", "pairs", "keyed_a"),
    [
        (GPT4O, "judgebench-gpt-4o-2024-05-13", 350, 193),
        (CLAUDE, "judgebench-claude-3-5-sonnet-20240620", 270, 143),
    ],
)
def test_judgebench_counts_keys_and_exact_text(
    shared_data: Path, name: str, dataset: str, pairs: int, keyed_a: int
) -> None:
    path = shared_data / "judgebench" / name
    loaded = load_judgebench(path)
    assert len(loaded) == pairs
    assert Counter(p.key for p in loaded) == {"A": keyed_a, "B": pairs - keyed_a}
    assert {p.dataset for p in loaded} == {dataset}
    assert len({p.pair_id for p in loaded}) == pairs

    raw = raw_jsonl(path)
    assert len(raw) == pairs
    for pair, record in zip(loaded, raw, strict=True):
        assert pair.pair_id == record["pair_id"]
        assert pair.source == record["source"]
        assert pair.question == record["question"]
        assert pair.answer_a == record["response_A"]
        assert pair.answer_b == record["response_B"]
        assert pair.key == {"A>B": "A", "B>A": "B"}[record["label"]]
        assert json.loads(pair.metadata) == {
            "original_id": record["original_id"],
            "response_model": record["response_model"],
        }


def test_judgebench_keeps_trailing_whitespace(shared_data: Path) -> None:
    path = shared_data / "judgebench" / GPT4O
    by_id = {p.pair_id: p for p in load_judgebench(path)}
    padded = [r for r in raw_jsonl(path) if r["response_A"] != r["response_A"].rstrip()]
    assert padded, "the GPT-4o file has answers ending in whitespace; this test needs them"
    for record in padded:
        answer = by_id[record["pair_id"]].answer_a
        assert answer == record["response_A"]
        assert answer.encode("utf-8") == record["response_A"].encode("utf-8")
        assert answer != answer.rstrip()


def test_judge_output_file_gives_the_same_pairs(shared_data: Path) -> None:
    data = load_judgebench(shared_data / "judgebench" / GPT4O)
    judged = load_judgebench(shared_data / "judgebench" / JUDGED)
    # The data README says the judge-output file may list records in another order.
    assert sorted(judged, key=lambda p: p.pair_id) == sorted(data, key=lambda p: p.pair_id)


def test_judgebench_dataset_override(shared_data: Path) -> None:
    pairs = load_judgebench(shared_data / "judgebench" / CLAUDE, dataset="jb-claude")
    assert {p.dataset for p in pairs} == {"jb-claude"}


def _judgebench_record(**changes: object) -> dict:
    record = {
        "pair_id": "p1",
        "original_id": 7,
        "source": "mmlu-pro-law",
        "question": "Q?",
        "response_model": "m",
        "response_A": "yes",
        "response_B": "no",
        "label": "A>B",
    }
    record.update(changes)
    return record


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"label": "A=B"}, "'label' must be 'A>B' or 'B>A', got 'A=B'"),
        ({"label": ["A>B"]}, "'label' must be"),
        ({"response_A": 42}, "'response_A' must be text, got int (42)"),
        ({"response_B": ["no"]}, "'response_B' must be text, got list"),
        ({"response_B": None}, "'response_B' must be text, got null"),
        ({"original_id": "7"}, "'original_id' must be an integer or null"),
    ],
)
def test_judgebench_bad_rows_name_file_and_row(tmp_path: Path, changes: dict, message: str) -> None:
    path = _write_jsonl(
        tmp_path / "jb.jsonl", [_judgebench_record(), _judgebench_record(**changes)]
    )
    with pytest.raises(InputError, match="row 2") as caught:
        load_judgebench(path)
    assert message in str(caught.value)
    assert caught.value.file == str(path)
    assert caught.value.row == 2


def test_judgebench_missing_answer_field(tmp_path: Path) -> None:
    record = _judgebench_record()
    del record["response_A"]
    path = _write_jsonl(tmp_path / "jb.jsonl", [record])
    with pytest.raises(InputError, match=r"jb\.jsonl, row 1: missing field 'response_A'"):
        load_judgebench(path)


def test_malformed_json_line_names_its_line(tmp_path: Path) -> None:
    good = json.dumps(_judgebench_record())
    path = tmp_path / "jb.jsonl"
    path.write_text(f'{good}\n\n{{"pair_id": "p2",\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"jb\.jsonl, row 3: malformed JSON line") as caught:
        load_judgebench(path)
    assert caught.value.row == 3


def test_json_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "jb.jsonl"
    path.write_text('["p1", "Q?"]\n', encoding="utf-8")
    with pytest.raises(InputError, match="row 1: expected a JSON object, got list"):
        load_judgebench(path)


def test_lone_surrogate_escape_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "jb.jsonl"
    line = json.dumps(_judgebench_record()).replace('"yes"', '"ab\\udc80"')
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="row 1: field 'response_A' is not valid UTF-8"):
        load_judgebench(path)


def test_invalid_utf8_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "jb.jsonl"
    good = json.dumps(_judgebench_record()).encode()
    bad = json.dumps(_judgebench_record(pair_id="p2")).encode().replace(b"yes", b"y\xffs")
    path.write_bytes(good + b"\n" + bad + b"\n")
    with pytest.raises(InputError, match="row 2: invalid UTF-8"):
        load_judgebench(path)


def test_judgebench_rows_are_file_lines(tmp_path: Path) -> None:
    first, second = (json.dumps(_judgebench_record(pair_id=p)) for p in ("p1", "p2"))
    path = tmp_path / "jb.jsonl"
    path.write_text(f"\n{first}\n\n \n{second}\n\n", encoding="utf-8")
    loaded = read_judgebench(path)
    assert [p.pair_id for p in loaded.pairs] == ["p1", "p2"]
    assert loaded.rows == [2, 5]
    assert load_judgebench(path) == loaded.pairs


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.jsonl: file not found"):
        load_judgebench(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="is a directory"):
        load_rmbench(tmp_path)


# --- RM-Bench --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "prompts"), [("code_filtered", 228), ("chat_filtered", 129)])
def test_rmbench_grid_difficulty_and_key_balance(
    shared_data: Path, name: str, prompts: int
) -> None:
    path = shared_data / "rmbench" / f"{name}.json"
    pairs = load_rmbench(path)
    prefix = "rmbench-" + name.removesuffix("_filtered")
    assert len(pairs) == 9 * prompts
    assert len({p.pair_id for p in pairs}) == len(pairs)
    assert {p.dataset for p in pairs} == {prefix}
    assert all(p.pair_id.startswith(prefix + "/") for p in pairs)

    per_prompt: dict[object, Counter[str]] = {}
    for pair in pairs:
        tags = json.loads(pair.metadata)
        per_prompt.setdefault(tags["id"], Counter())[tags["difficulty"]] += 1
    assert len(per_prompt) == prompts
    assert all(c == {"hard": 3, "normal": 3, "easy": 3} for c in per_prompt.values())

    share_a = sum(p.key == "A" for p in pairs) / len(pairs)
    assert 0.45 <= share_a <= 0.55


def test_rmbench_key_names_the_chosen_answer_exactly(shared_data: Path) -> None:
    path = shared_data / "rmbench" / "chat_filtered.json"
    records = {r["id"]: r for r in json.loads(path.read_bytes())}
    for pair in load_rmbench(path):
        tags = json.loads(pair.metadata)
        record = records[tags["id"]]
        i, j = STYLES.index(tags["chosen_style"]), STYLES.index(tags["rejected_style"])
        assert pair.pair_id == f"rmbench-chat/{tags['id']}/c{i}r{j}"
        assert tags["difficulty"] == ("hard" if i < j else "normal" if i == j else "easy")
        chosen, rejected = record["chosen"][i], record["rejected"][j]
        keyed, other = (
            (pair.answer_a, pair.answer_b) if pair.key == "A" else (pair.answer_b, pair.answer_a)
        )
        assert keyed == chosen
        assert other == rejected
        assert pair.question == record["prompt"]
        assert pair.source == record["subset"] == "alpacaeval"
        assert tags["error_key"] == record["error_key"]
        assert tags["subset"] == record["subset"]


def test_rmbench_files_give_disjoint_ids_and_code_tags(shared_data: Path) -> None:
    code = load_rmbench(shared_data / "rmbench" / "code_filtered.json")
    chat = load_rmbench(shared_data / "rmbench" / "chat_filtered.json")
    assert not {p.pair_id for p in code} & {p.pair_id for p in chat}
    tags = json.loads(code[0].metadata)
    assert {"language", "task_id", "id", "subset", "chosen_style", "rejected_style"} <= set(tags)


def test_rmbench_is_deterministic(shared_data: Path) -> None:
    path = shared_data / "rmbench" / "code_filtered.json"
    assert load_rmbench(path) == load_rmbench(path)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {"id": 1, "prompt": "p", "subset": "s", "chosen": ["a", "b"], "rejected": ["x"] * 3},
            "'chosen' must be a list of 3 answers",
        ),
        (
            {"id": 1, "prompt": "p", "subset": "s", "chosen": ["a", 2, "c"], "rejected": ["x"] * 3},
            "chosen[1] must be text, got int",
        ),
        (
            {"id": 1, "prompt": 5, "subset": "s", "chosen": ["a"] * 3, "rejected": ["x"] * 3},
            "field 'prompt' must be text",
        ),
        (
            {"id": [1], "prompt": "p", "subset": "s", "chosen": ["a"] * 3, "rejected": ["x"] * 3},
            "field 'id' must be an integer or text",
        ),
    ],
)
def test_rmbench_bad_records(tmp_path: Path, record: dict, message: str) -> None:
    good = {"id": 0, "prompt": "p", "subset": "s", "chosen": ["a"] * 3, "rejected": ["x"] * 3}
    path = tmp_path / "code_filtered.json"
    path.write_text(json.dumps([good, record]), encoding="utf-8")
    with pytest.raises(InputError, match="row 2") as caught:
        load_rmbench(path)
    assert message in str(caught.value)


def test_rmbench_rows_are_record_numbers(tmp_path: Path) -> None:
    records = [
        {"id": n, "prompt": "p", "subset": "s", "chosen": ["a"] * 3, "rejected": ["x"] * 3}
        for n in (7, 3)
    ]
    path = tmp_path / "code_filtered.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    loaded = read_rmbench(path)
    assert loaded.rows == [1] * 9 + [2] * 9
    assert [p.pair_id.split("/")[1] for p in loaded.pairs] == ["7"] * 9 + ["3"] * 9
    assert load_rmbench(path) == loaded.pairs


def test_rmbench_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text('[{"id": 1,\n "prompt": }]', encoding="utf-8")
    with pytest.raises(InputError, match=r"chat\.json: malformed JSON: .* line 2"):
        load_rmbench(path)


# --- generic tables --------------------------------------------------------------------

TRICKY = [
    # (question, answer_a, answer_b, key) with CRLF, non-ASCII, trailing spaces, U+2028
    ("Qu'est-ce que ½ + ¼ ?", "¾ \r\n", "  0,75\r\n\r\n", "A"),
    ("Line\u2028separator?", "a\u2028b", "a\nb  ", "B"),
    ('Tabs\tand "quotes", commas', "x,\ty", '"quoted"', ""),
    ("no key", "\r", "\n", "none"),
]
MAPPING = ColumnMapping.parse(
    "question=prompt,answer_a=resp1,answer_b=resp2,key=label,metadata=lang"
)


def _check_tricky(pairs: list[Pair], stem: str) -> None:
    assert len(pairs) == len(TRICKY)
    for row, (pair, (question, a, b, key)) in enumerate(zip(pairs, TRICKY, strict=True), 1):
        assert pair.pair_id == f"{stem}-{row}"
        assert (pair.question, pair.answer_a, pair.answer_b) == (question, a, b)
        assert pair.key == (key if key in ("A", "B") else None)
        assert json.loads(pair.metadata) == {"lang": "fr"}
        assert pair.dataset == stem


def test_csv_round_trip_keeps_crlf_and_non_ascii(tmp_path: Path) -> None:
    path = tmp_path / "tricky.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "resp1", "resp2", "label", "lang"])
        writer.writerows([[q, a, b, k, "fr"] for q, a, b, k in TRICKY])
    pairs = load_table(path, MAPPING)
    _check_tricky(pairs, "tricky")
    assert pairs[0].source == "tricky.csv"


def test_jsonl_table_round_trip(tmp_path: Path) -> None:
    rows = [
        {"prompt": q, "resp1": a, "resp2": b, "label": k or None, "lang": "fr"}
        for q, a, b, k in TRICKY
    ]
    _check_tricky(load_table(_write_jsonl(tmp_path / "tricky.jsonl", rows), MAPPING), "tricky")


def test_parquet_table_round_trip(tmp_path: Path) -> None:
    table = pa.table(
        {
            "prompt": [q for q, *_ in TRICKY],
            "resp1": [a for _, a, _, _ in TRICKY],
            "resp2": [b for _, _, b, _ in TRICKY],
            "label": [k or None for *_, k in TRICKY],
            "lang": ["fr"] * len(TRICKY),
            "unused": [1.5] * len(TRICKY),
        }
    )
    pq.write_table(table, tmp_path / "tricky.parquet")
    _check_tricky(load_table(tmp_path / "tricky.parquet", MAPPING), "tricky")


def test_table_with_id_reference_and_source_columns(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"id": 17, "q": "Q", "x": "a", "y": "b", "ref": "r", "src": "s1"},
        {"id": "p-2", "q": "Q2", "x": "c", "y": "d", "ref": None, "src": "s2"},
    ]
    mapping = ColumnMapping.parse(
        " pair_id = id, question=q, answer_a=x, answer_b=y, reference=ref, source=src "
    )
    pairs = load_table(_write_jsonl(tmp_path / "t.jsonl", rows), mapping, dataset="mine")
    assert [p.pair_id for p in pairs] == ["17", "p-2"]
    assert [p.reference for p in pairs] == ["r", None]
    assert [p.source for p in pairs] == ["s1", "s2"]
    assert [p.key for p in pairs] == [None, None]
    assert {p.dataset for p in pairs} == {"mine"}


def test_table_rows_are_the_rows_errors_name(tmp_path: Path) -> None:
    """jsonl: the line (blank lines count); csv: the data record, whatever lines it spans."""
    rows = [{"prompt": "Q", "resp1": "a", "resp2": "b", "label": "A", "lang": "fr"}] * 2
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(["", json.dumps(rows[0]), "", "", json.dumps(rows[1])]) + "\n")
    assert read_table(path, MAPPING).rows == [2, 5]
    assert [p.pair_id for p in load_table(path, MAPPING)] == ["t-2", "t-5"]
    path = tmp_path / "t.csv"
    path.write_bytes(b'prompt,resp1,resp2,label,lang\nQ,"two\nlines",b,A,fr\n\nQ,a,b,B,fr\n')
    assert read_table(path, MAPPING).rows == [1, 2]


def test_loaded_pairs_need_one_row_per_pair() -> None:
    with pytest.raises(ValueError, match="0 pairs but 1 rows"):
        LoadedPairs([], [1])


def test_invalid_utf8_csv_names_file_and_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(
        b"prompt,resp1,resp2,label,lang\r\n"
        b"Q1,a,b,A,fr\r\n"
        b'Q2,"multi\r\nline",b,B,fr\r\n'
        b"Q3,ok,caf\xe9,A,fr\r\n"
    )
    with pytest.raises(InputError, match=r"bad\.csv, row 3: invalid UTF-8 in column 'resp2'"):
        load_table(path, MAPPING)


def test_bad_key_names_file_row_and_value(tmp_path: Path) -> None:
    path = tmp_path / "keys.csv"
    path.write_text(
        "prompt,resp1,resp2,label,lang\nQ,a,b,A,fr\nQ,a,b,a>b,fr\n", encoding="utf-8", newline=""
    )
    with pytest.raises(InputError, match=r"keys\.csv, row 2: key \(column 'label'\) .*'a>b'"):
        load_table(path, MAPPING)


def test_wrong_type_and_missing_answer_in_table(tmp_path: Path) -> None:
    base = {"prompt": "Q", "resp1": "a", "resp2": "b", "label": "A", "lang": "fr"}
    path = _write_jsonl(tmp_path / "t.jsonl", [base, base | {"resp1": 3.5}])
    with pytest.raises(InputError, match=r"row 2: answer_a \(column 'resp1'\) must be text, got"):
        load_table(path, MAPPING)
    missing = {k: v for k, v in base.items() if k != "resp2"}
    path = _write_jsonl(tmp_path / "t.jsonl", [missing])
    with pytest.raises(InputError, match=r"row 1: missing answer_b \(column 'resp2'\)"):
        load_table(path, MAPPING)


def test_missing_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cols.csv"
    path.write_text("prompt,resp1,label,lang\nQ,a,A,fr\n", encoding="utf-8", newline="")
    with pytest.raises(InputError, match=r"cols\.csv: missing column\(s\) \['resp2'\]"):
        load_table(path, MAPPING)
    pq.write_table(pa.table({"prompt": ["Q"], "resp1": ["a"]}), tmp_path / "cols.parquet")
    with pytest.raises(InputError, match=r"missing column\(s\) \['resp2', 'label', 'lang'\]"):
        load_table(tmp_path / "cols.parquet", MAPPING)


def test_csv_row_with_wrong_field_count(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("prompt,resp1,resp2,label,lang\nQ,a,b\n", encoding="utf-8", newline="")
    with pytest.raises(InputError, match="row 1: has 3 fields but the header has 5"):
        load_table(path, MAPPING)


def test_unreadable_table_files(tmp_path: Path) -> None:
    (tmp_path / "x.xlsx").write_bytes(b"")
    with pytest.raises(InputError, match="unknown table format '.xlsx'"):
        load_table(tmp_path / "x.xlsx", MAPPING)
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="not a readable parquet file"):
        load_table(tmp_path / "x.parquet", MAPPING)
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        load_table(tmp_path / "empty.csv", MAPPING)
    with pytest.raises(InputError, match="file not found"):
        load_table(tmp_path / "gone.parquet", MAPPING)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("question=q,answer_a=a", "missing answer_b"),
        ("question=q,answer_a=a,answer_b=b,colour=c", "unknown field 'colour'"),
        ("question=q,answer_a=a,answer_b=b,question=z", "field 'question' given twice"),
        ("question=q,answer_a,answer_b=b", "'answer_a' is not field=column"),
    ],
)
def test_column_mapping_errors(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        ColumnMapping.parse(spec)


def test_column_mapping_metadata_forms() -> None:
    mapping = ColumnMapping.parse("question=q,answer_a=a,answer_b=b,metadata=x;y,metadata=z")
    assert mapping.metadata == ("x", "y", "z")
    assert mapping.columns() == ["q", "a", "b", "x", "y", "z"]


def test_key_values_map_a_table_labels_to_identities(tmp_path: Path) -> None:
    path = tmp_path / "prefs.csv"
    path.write_text("q,x,y,label\nQ1,a,b,A>B\nQ2,c,d,B>A\nQ3,e,f,tie\nQ4,g,h,\n", "utf-8")
    spec = "question=q,answer_a=x,answer_b=y,key=label{A>B:A, B>A:B, tie:none}"
    mapping = ColumnMapping.parse(spec)
    assert mapping.key == "label" and mapping.columns() == ["q", "x", "y", "label"]
    assert [p.key for p in load_table(path, mapping)] == ["A", "B", None, None]
    # `;` separates entries too, and numbers match their text (a JSON-lines 0/1 column).
    rows = [{"q": "Q", "x": "a", "y": "b", "w": 1}, {"q": "Q", "x": "a", "y": "b", "w": 0}]
    numeric = ColumnMapping.parse("question=q,answer_a=x,answer_b=y,key=w{0:A;1:B}")
    assert [p.key for p in load_table(_write_jsonl(tmp_path / "w.jsonl", rows), numeric)] == [
        "B",
        "A",
    ]
    # A value the mapping does not list is an error naming the row, value and mapping.
    path.write_text("q,x,y,label\nQ1,a,b,A>B\nQ2,c,d,A=B\n", "utf-8")
    with pytest.raises(InputError, match=r"prefs\.csv, row 2: key \(column 'label'\) value "):
        load_table(path, mapping)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("question=q,answer_a=a,answer_b=b,key=k{A>B:A,B>A:C}", "maps 'B>A' to 'C'"),
        ("question=q,answer_a=a,answer_b=b,key=k{A>B}", "'A>B' is not value:A"),
        ("question=q,answer_a=a,answer_b=b,key=k{A>B:A", "unclosed"),
        ("question=q{x:A},answer_a=a,answer_b=b", "only key takes a value mapping"),
        ("question=q,answer_a=a,answer_b=b,key=k{1:A,1:B}", "'1' twice"),
    ],
)
def test_key_value_mapping_errors(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        ColumnMapping.parse(spec)


# --- dispatch --------------------------------------------------------------------------


def test_load_source_dispatches(shared_data: Path, tmp_path: Path) -> None:
    assert set(KINDS) == {"judgebench", "rmbench", "table", "demo", "answers"}
    jb = load_source("judgebench", shared_data / "judgebench" / CLAUDE)
    assert len(jb) == 270
    rm = load_source("rmbench", shared_data / "rmbench" / "chat_filtered.json", dataset="rc")
    assert len(rm) == 1161 and {p.dataset for p in rm} == {"rc"}
    demo = load_source("demo", dataset="demo2")
    assert len(demo) == 150 and {p.dataset for p in demo} == {"demo2"}
    path = _write_jsonl(tmp_path / "t.jsonl", [{"q": "Q", "x": "a", "y": "b"}])
    table = load_source("table", path, mapping="question=q,answer_a=x,answer_b=y")
    assert [(p.pair_id, p.answer_a, p.key) for p in table] == [("t-1", "a", None)]


def test_read_source_keeps_the_rows(shared_data: Path) -> None:
    rm = read_source("rmbench", shared_data / "rmbench" / "chat_filtered.json")
    assert rm.rows == [n for n in range(1, 130) for _ in range(9)]
    assert rm.pairs == load_source("rmbench", shared_data / "rmbench" / "chat_filtered.json")
    demo = read_source("demo")
    assert demo.rows == list(range(1, 151))


@pytest.mark.parametrize(
    ("kind", "path", "mapping", "message"),
    [
        ("hf", "x.jsonl", None, "unknown source kind 'hf'"),
        ("table", "x.jsonl", None, "needs a column mapping"),
        ("judgebench", "x.jsonl", "question=q", "only applies to kind 'table'"),
        ("demo", "x.jsonl", None, "takes no file"),
        ("rmbench", None, None, "needs a file path"),
    ],
)
def test_load_source_errors(kind: str, path: str | None, mapping: str | None, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_source(kind, path, mapping=mapping)
