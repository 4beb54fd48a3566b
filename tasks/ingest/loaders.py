"""Benchmark loaders: JudgeBench and RM-Bench files into `Pair`s, answer text exact, and
`read_source`, which dispatches on the source kind (generic tables: `tasks.ingest.tables`).

Rows are 1-based: the line of a JudgeBench `.jsonl`, the record of an RM-Bench JSON array.
Each `read_*` gives the pairs with the row of each (`LoadedPairs`), so that freezing can
name the row of a pair it refuses; each `load_*` gives the pairs alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from schemas import Pair
from schemas.vocabulary import Identity
from tasks.errors import InputError
from tasks.hashing import canonical_json, digest
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.ingest.fields import (
    TOO_DEEP,
    LoadedPairs,
    check_unicode,
    iter_jsonl,
    json_value,
    read_bytes,
    required_text,
    shorten,
    text_field,
    type_name,
)
from tasks.ingest.tables import ColumnMapping, read_table

__all__ = [
    "KINDS",
    "load_judgebench",
    "load_rmbench",
    "load_source",
    "read_judgebench",
    "read_rmbench",
    "read_source",
]

KINDS = ("judgebench", "rmbench", "table", "demo", "answers")
"""The source kinds `load_source` dispatches on."""

_JUDGEBENCH_LABELS: dict[str, Identity] = {"A>B": "A", "B>A": "B"}
_RMBENCH_STYLES = ("concise", "detailed_plain", "detailed_markdown")


# --- JudgeBench ------------------------------------------------------------------------


def _judgebench_dataset(path: Path) -> str:
    """`dataset=judgebench,response_model=M[,...]` -> `judgebench-M`; else the file stem."""
    parts = dict(p.split("=", 1) for p in path.stem.split(",") if "=" in p)
    named = [parts[k] for k in ("dataset", "response_model") if parts.get(k)]
    return "-".join(named) if named else path.stem


def read_judgebench(path: str | Path, *, dataset: str | None = None) -> LoadedPairs:
    """Pairs of a JudgeBench jsonl file (data file or judge-output file; `judgments` ignored),
    with the line of each.

    `response_A` is identity A; label `A>B` keys A, `B>A` keys B. The dataset defaults to
    the name in the file name, e.g. `judgebench-gpt-4o-2024-05-13`.
    """
    path = Path(path)
    name = dataset or _judgebench_dataset(path)
    pairs, rows = [], []
    for row, record in iter_jsonl(path):
        label = record.get("label")
        if not isinstance(label, str) or label not in _JUDGEBENCH_LABELS:
            problem = (
                "missing field 'label'"
                if "label" not in record
                else (f"field 'label' must be 'A>B' or 'B>A', got {shorten(label)}")
            )
            raise InputError(problem, file=str(path), row=row)
        metadata: dict[str, Any] = {}
        original_id = record.get("original_id")
        if isinstance(original_id, bool) or not isinstance(original_id, int | None):
            raise InputError(
                f"field 'original_id' must be an integer or null, got {shorten(original_id)}",
                file=str(path),
                row=row,
            )
        if "original_id" in record:
            metadata["original_id"] = original_id
        response_model = text_field(record, "response_model", file=path, row=row, optional=True)
        if response_model is not None:
            metadata["response_model"] = response_model
        pairs.append(
            Pair(
                pair_id=required_text(record, "pair_id", file=path, row=row),
                dataset=name,
                source=required_text(record, "source", file=path, row=row),
                question=required_text(record, "question", file=path, row=row),
                answer_a=required_text(record, "response_A", file=path, row=row),
                answer_b=required_text(record, "response_B", file=path, row=row),
                key=_JUDGEBENCH_LABELS[label],
                metadata=canonical_json(metadata),
            )
        )
        rows.append(row)
    return LoadedPairs(pairs, rows)


def load_judgebench(path: str | Path, *, dataset: str | None = None) -> list[Pair]:
    """The pairs of `read_judgebench`, without their lines."""
    return list(read_judgebench(path, dataset=dataset).pairs)


# --- RM-Bench --------------------------------------------------------------------------


def _rmbench_name(path: Path) -> str:
    """`code_filtered.json` -> `rmbench-code`: also the pair-id prefix (ids repeat across files)."""
    stem = path.stem.removesuffix("_filtered")
    return stem if stem.startswith("rmbench") else f"rmbench-{stem}"


def _difficulty(chosen: int, rejected: int) -> str:
    # RM-Bench's grid: a chosen answer less styled than the rejected one is the hard case.
    if chosen < rejected:
        return "hard"
    return "normal" if chosen == rejected else "easy"


def _chosen_is_a(pair_id: str) -> bool:
    """Which identity the chosen answer gets: one stable hash bit, so keys split about evenly."""
    return int(digest("rmbench-identity", pair_id)[-1], 16) % 2 == 0


def _decode_json_document(path: Path) -> Any:
    data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"invalid UTF-8 at byte {exc.start} (line {line})", file=str(path)
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", file=str(path)
        ) from None
    except RecursionError:
        raise InputError(TOO_DEEP, file=str(path)) from None


def _variants(record: dict[str, Any], field: str, *, file: Path, row: int) -> list[str]:
    value = record.get(field)
    if not isinstance(value, list) or len(value) != len(_RMBENCH_STYLES):
        got = "nothing" if field not in record else f"{type_name(value)} {shorten(value)}"
        raise InputError(
            f"field {field!r} must be a list of {len(_RMBENCH_STYLES)} answers "
            f"({', '.join(_RMBENCH_STYLES)}), got {got}",
            file=str(file),
            row=row,
        )
    for i, answer in enumerate(value):
        if not isinstance(answer, str):
            raise InputError(
                f"{field}[{i}] must be text, got {type_name(answer)} ({shorten(answer)})",
                file=str(file),
                row=row,
            )
        check_unicode(answer, f"{field}[{i}]", file=file, row=row)
    return value


def read_rmbench(path: str | Path, *, dataset: str | None = None) -> LoadedPairs:
    """Nine pairs per RM-Bench prompt: 3 chosen x 3 rejected style variants, each with the
    number of its record.

    Pair ids are `<file name>/<id>/c<i>r<j>` (e.g. `rmbench-code/8/c0r2`); metadata tags
    `difficulty` (hard: chosen less styled, normal: same style, easy: chosen more styled),
    both styles and the record's scalar fields. A stable hash of the pair id decides
    which identity holds the chosen answer; the key names that identity.
    """
    path = Path(path)
    prefix = _rmbench_name(path)
    name = dataset or prefix
    document = _decode_json_document(path)
    if not isinstance(document, list):
        raise InputError(
            f"expected a JSON list of prompts, got {type_name(document)}", file=str(path)
        )
    pairs, rows = [], []
    for row, record in enumerate(document, start=1):
        if not isinstance(record, dict):
            raise InputError(
                f"expected a JSON object, got {type_name(record)}", file=str(path), row=row
            )
        record_id = record.get("id")
        if isinstance(record_id, bool) or not isinstance(record_id, int | str):
            raise InputError(
                f"field 'id' must be an integer or text, got {shorten(record_id)}",
                file=str(path),
                row=row,
            )
        question = required_text(record, "prompt", file=path, row=row)
        subset = required_text(record, "subset", file=path, row=row)
        chosen = _variants(record, "chosen", file=path, row=row)
        rejected = _variants(record, "rejected", file=path, row=row)
        tags = {
            k: json_value(v, f"field {k!r}", file=path, row=row)
            for k, v in record.items()
            if k not in ("prompt", "chosen", "rejected")
            and (v is None or isinstance(v, str | int | float | bool))
        }
        for i, good in enumerate(chosen):
            for j, bad in enumerate(rejected):
                pair_id = f"{prefix}/{record_id}/c{i}r{j}"
                a_is_chosen = _chosen_is_a(pair_id)
                metadata = tags | {
                    "chosen_style": _RMBENCH_STYLES[i],
                    "rejected_style": _RMBENCH_STYLES[j],
                    "difficulty": _difficulty(i, j),
                }
                pairs.append(
                    Pair(
                        pair_id=pair_id,
                        dataset=name,
                        source=subset,
                        question=question,
                        answer_a=good if a_is_chosen else bad,
                        answer_b=bad if a_is_chosen else good,
                        key="A" if a_is_chosen else "B",
                        metadata=canonical_json(metadata),
                    )
                )
                rows.append(row)
    return LoadedPairs(pairs, rows)


def load_rmbench(path: str | Path, *, dataset: str | None = None) -> list[Pair]:
    """The pairs of `read_rmbench`, without their record numbers."""
    return list(read_rmbench(path, dataset=dataset).pairs)


# --- dispatch --------------------------------------------------------------------------


def read_source(
    kind: str,
    path: str | Path | None = None,
    *,
    mapping: str | None = None,
    dataset: str | None = None,
    baseline: str | None = None,
    pairs: str | None = None,
) -> LoadedPairs:
    """Pairs of one source kind (`judgebench`, `rmbench`, `table`, `demo` or `answers`),
    with the row of each (for `demo`, its position).

    `mapping` (the `ColumnMapping.parse` format) is required for `table` and refused
    otherwise; `demo` takes no path; `baseline` (required) and `pairs` are for `answers`
    (`tasks.ingest.answers`). `dataset` overrides the default dataset name.
    """
    if kind not in KINDS:
        raise InputError(f"unknown source kind {kind!r}; expected one of {', '.join(KINDS)}")
    if mapping is not None and kind != "table":
        raise InputError(f"a column mapping only applies to kind 'table', not {kind!r}")
    if (baseline is not None or pairs is not None) and kind != "answers":
        raise InputError(f"baseline and pairs only apply to kind 'answers', not {kind!r}")
    if kind == "demo":
        if path is not None:
            raise InputError(f"kind 'demo' is generated and takes no file, got {str(path)!r}")
        generated = demo_pairs()
        if dataset:
            generated = [p.model_copy(update={"dataset": dataset}) for p in generated]
        return LoadedPairs(generated, list(range(1, len(generated) + 1)))
    if path is None:
        raise InputError(f"kind {kind!r} needs a file path")
    if kind == "judgebench":
        return read_judgebench(path, dataset=dataset)
    if kind == "rmbench":
        return read_rmbench(path, dataset=dataset)
    if kind == "answers":
        from tasks.ingest.answers import read_answers

        return read_answers(path, baseline=baseline, pairs=pairs, dataset=dataset)
    if mapping is None:
        raise InputError(
            "kind 'table' needs a column mapping, e.g. "
            "'question=prompt,answer_a=resp1,answer_b=resp2,key=label'",
            file=str(path),
        )
    return read_table(path, ColumnMapping.parse(mapping), dataset=dataset)


def load_source(
    kind: str,
    path: str | Path | None = None,
    *,
    mapping: str | None = None,
    dataset: str | None = None,
) -> list[Pair]:
    """The pairs of `read_source`, without their rows."""
    return list(read_source(kind, path, mapping=mapping, dataset=dataset).pairs)
