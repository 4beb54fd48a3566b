"""Generic tables into `Pair`s through a `--map` column mapping, and the file reading and
field checks every loader shares.

Every reader takes bytes and decodes UTF-8 strictly, so answer text reaches the manifest
exactly as the file holds it (no stripping, no newline translation). A bad file or row is
an `InputError` naming the file and the 1-based row: the line for `.jsonl`, the record
for a JSON array, the data record (header excluded) for `.csv`, the row for `.parquet`.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from schemas import Pair
from schemas.vocabulary import Identity
from tasks.errors import InputError
from tasks.hashing import canonical_json

__all__ = ["ColumnMapping", "LoadedPairs", "load_table", "read_table"]

_BOM = b"\xef\xbb\xbf"
_IDENTITIES: dict[str, Identity] = {"A": "A", "B": "B"}
_TABLE_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")
# json.loads recurses once per nesting level and raises RecursionError (not a decode
# error) on deeply nested brackets (about a thousand levels).
TOO_DEEP = "malformed JSON: nested too deeply to read"


@dataclass(frozen=True)
class LoadedPairs:
    """A source's pairs and, in step with them, the 1-based row of the file each came from.

    The row is the one load errors name (the line of a `.jsonl`, the record of a JSON array
    or `.csv`, the row of a `.parquet`), kept so that freezing can name it too. It is not
    part of the pair, so it never reaches the manifest or its hash.
    """

    pairs: list[Pair]
    rows: list[int]

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.pairs):
            raise ValueError(f"{len(self.pairs)} pairs but {len(self.rows)} rows")


# --- reading and checking values (shared with tasks/loaders.py) -------------------------


def read_bytes(path: Path) -> bytes:
    """The file's bytes without a leading byte-order mark; InputError if it cannot be read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", file=str(path)) from None
    # A byte-order mark belongs to the file's encoding, not to any field.
    return data[len(_BOM) :] if data.startswith(_BOM) else data


def type_name(value: Any) -> str:
    """A value's type as a message names it (`null` for None)."""
    return "null" if value is None else type(value).__name__


def text_field(
    record: dict[str, Any],
    field: str,
    *,
    file: Path,
    row: int,
    optional: bool = False,
    what: str | None = None,
) -> str | None:
    """A text field, exactly as stored; `what` names the field for the message."""
    label = what or f"field {field!r}"
    if field not in record:
        if optional:
            return None
        raise InputError(f"missing {label}", file=str(file), row=row)
    value = record[field]
    if value is None and optional:
        return None
    if not isinstance(value, str):
        shown = "" if value is None else f" ({shorten(value)})"
        raise InputError(
            f"{label} must be text, got {type_name(value)}{shown}", file=str(file), row=row
        )
    check_unicode(value, label, file=file, row=row)
    return value


def required_text(record: dict[str, Any], field: str, *, file: Path, row: int, **kw: Any) -> str:
    value = text_field(record, field, file=file, row=row, **kw)
    assert value is not None  # only optional fields come back as None
    return value


def check_unicode(value: str, label: str, *, file: Path, row: int) -> None:
    # A JSON "\udXXX" escape or an undecodable byte kept aside can yield a lone surrogate,
    # which has no UTF-8 bytes and so no answer hash downstream.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{label} is not valid UTF-8 text (invalid byte or lone surrogate at character "
            f"{exc.start})",
            file=str(file),
            row=row,
        ) from None


def shorten(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(value: Any, label: str, *, file: Path, row: int) -> Identity | None:
    """Key values: `A`, `B`; empty, null or `none` mean no key; anything else is an error."""
    if value is None:
        return None
    if isinstance(value, str):
        if value in _IDENTITIES:
            return _IDENTITIES[value]
        if value == "" or value.lower() == "none":
            return None
    raise InputError(
        f"{label} must be 'A', 'B' or empty/none, got {shorten(value)}", file=str(file), row=row
    )


def json_value(value: Any, label: str, *, file: Path, row: int) -> Any:
    """A value that canonical JSON can hold (for metadata)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{label} is {value}, not a finite number", file=str(file), row=row)
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        raise InputError(
            f"{label} of type {type_name(value)} cannot be kept as JSON metadata",
            file=str(file),
            row=row,
        ) from None
    return value


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON-lines file."""
    data = read_bytes(path)
    # Split on LF bytes only: str.splitlines would also split on U+2028 and friends, which
    # JSON strings may hold raw. A CR before the LF is JSON whitespace.
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"invalid UTF-8 at byte {exc.start} of the line", file=str(path), row=number
            ) from None
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON line: {exc.msg} at column {exc.colno}", file=str(path), row=number
            ) from None
        except RecursionError:
            raise InputError(TOO_DEEP, file=str(path), row=number) from None
        if not isinstance(record, dict):
            raise InputError(
                f"expected a JSON object, got {type_name(record)}", file=str(path), row=number
            )
        yield number, record


# --- generic tables --------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnMapping:
    """Which column of a generic table holds each pair field.

    >>> ColumnMapping.parse("question=prompt,answer_a=resp1,answer_b=resp2,key=label")
    ColumnMapping(pair_id=None, question='prompt', answer_a='resp1', answer_b='resp2', \
key='label', reference=None, source=None, metadata=())

    `metadata` may repeat (`metadata=lang,metadata=topic`) or list columns with `;`.
    """

    pair_id: str | None
    question: str
    answer_a: str
    answer_b: str
    key: str | None = None
    reference: str | None = None
    source: str | None = None
    metadata: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> ColumnMapping:
        """Parse `field=column,...`; fields are this class's names, spaces around are ignored."""
        known = {f.name for f in fields(cls)}
        chosen: dict[str, str] = {}
        metadata: list[str] = []
        for item in spec.split(","):
            if not item.strip():
                continue
            field, eq, column = (s.strip() for s in item.partition("="))
            if not eq or not column:
                raise InputError(f"column mapping {spec!r}: {item.strip()!r} is not field=column")
            if field not in known:
                raise InputError(
                    f"column mapping {spec!r}: unknown field {field!r} "
                    f"(known: {', '.join(sorted(known))})"
                )
            if field == "metadata":
                metadata.extend(c.strip() for c in column.split(";") if c.strip())
            elif field in chosen:
                raise InputError(f"column mapping {spec!r}: field {field!r} given twice")
            else:
                chosen[field] = column
        missing = [f for f in ("question", "answer_a", "answer_b") if f not in chosen]
        if missing:
            raise InputError(f"column mapping {spec!r}: missing {', '.join(missing)}")
        return cls(
            pair_id=chosen.get("pair_id"),
            question=chosen["question"],
            answer_a=chosen["answer_a"],
            answer_b=chosen["answer_b"],
            key=chosen.get("key"),
            reference=chosen.get("reference"),
            source=chosen.get("source"),
            metadata=tuple(dict.fromkeys(metadata)),
        )

    def columns(self) -> list[str]:
        """Every column the mapping reads, in a stable order without repeats."""
        named = [
            self.pair_id,
            self.question,
            self.answer_a,
            self.answer_b,
            self.key,
            self.reference,
            self.source,
            *self.metadata,
        ]
        return list(dict.fromkeys(c for c in named if c is not None))


def _csv_records(text: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(physical line where the record starts, fields) for each non-blank record."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    start = 1
    while True:
        try:
            fields_ = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ValueError(f"line {reader.line_num}: {exc}") from None
        if fields_:
            yield start, fields_
        start = reader.line_num + 1


def _iter_csv(path: Path, columns: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(data record number, record) for a csv/tsv file; the first record is the header."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    # Long answers exceed csv's default 128 KiB field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    data = read_bytes(path)
    try:
        text = data.decode("utf-8")
        strict = True
    except UnicodeDecodeError:
        # Parse with the bad bytes kept aside as lone surrogates, to name the record.
        text = data.decode("utf-8", errors="surrogateescape")
        strict = False
    header: list[str] | None = None
    try:
        for number, (line, record) in enumerate(_csv_records(text, delimiter)):
            if not strict:
                for i, value in enumerate(record):
                    try:
                        value.encode("utf-8")
                    except UnicodeEncodeError:
                        col = header[i] if header and i < len(header) else f"#{i + 1}"
                        where = "the header" if header is None else f"column {col!r}"
                        raise InputError(
                            f"invalid UTF-8 in {where} (line {line})",
                            file=str(path),
                            row=number if number else "0 (header)",
                        ) from None
            if header is None:
                header = record
                _check_header(header, columns, path)
                continue
            if len(record) != len(header):
                raise InputError(
                    f"has {len(record)} fields but the header has {len(header)} (line {line})",
                    file=str(path),
                    row=number,
                )
            yield number, dict(zip(header, record, strict=True))
    except ValueError as exc:
        raise InputError(f"malformed CSV: {exc}", file=str(path)) from None
    if header is None:
        raise InputError("empty file: no header row", file=str(path))
    if not strict:  # unreachable unless the csv module drops characters
        raise InputError("invalid UTF-8", file=str(path))


def _check_header(header: list[str], columns: list[str], path: Path) -> None:
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise InputError(f"header repeats column(s) {repeated}", file=str(path), row="0 (header)")
    _check_columns(header, columns, path)


def _check_columns(have: list[str], columns: list[str], path: Path) -> None:
    missing = [c for c in columns if c not in have]
    if missing:
        raise InputError(f"missing column(s) {missing}; the file has {have}", file=str(path))


def _iter_parquet(path: Path, columns: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.exists():
        raise InputError("file not found", file=str(path))
    try:
        schema = pq.read_schema(path)
        _check_columns(list(schema.names), columns, path)
        table = pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable parquet file: {exc}", file=str(path)) from None
    try:
        rows = table.to_pylist()
    except UnicodeDecodeError:
        # Parquet does not check that string columns hold UTF-8; find the cell to name it.
        for column in table.column_names:
            for row, value in enumerate(table.column(column), start=1):
                try:
                    value.as_py()
                except UnicodeDecodeError as exc:
                    raise InputError(
                        f"invalid UTF-8 in column {column!r} at byte {exc.start}",
                        file=str(path),
                        row=row,
                    ) from None
        raise
    yield from enumerate(rows, start=1)


def _iter_jsonl_columns(path: Path, columns: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    # A row lacking a mapped column is reported by the field check, naming row and column.
    return iter_jsonl(path)


_TABLE_READERS: dict[str, Callable[[Path, list[str]], Iterator[tuple[int, dict[str, Any]]]]] = {
    ".jsonl": _iter_jsonl_columns,
    ".ndjson": _iter_jsonl_columns,
    ".csv": _iter_csv,
    ".tsv": _iter_csv,
    ".parquet": _iter_parquet,
}


def read_table(
    path: str | Path, mapping: ColumnMapping, *, dataset: str | None = None
) -> LoadedPairs:
    """Pairs of a `.jsonl`, `.csv` (`.tsv`) or `.parquet` table through a column mapping,
    with the row of each.

    Without a pair-id column the id is `<file stem>-<row>`; the source defaults to the
    file name, the dataset to the file stem. Mapped `metadata` columns are kept as JSON.
    """
    path = Path(path)
    reader = _TABLE_READERS.get(path.suffix.lower())
    if reader is None:
        raise InputError(
            f"unknown table format {path.suffix!r}; expected one of {', '.join(_TABLE_SUFFIXES)}",
            file=str(path),
        )
    name = dataset or path.stem
    pairs, rows = [], []
    for row, record in reader(path, mapping.columns()):
        pairs.append(_table_pair(record, mapping, file=path, row=row, dataset=name))
        rows.append(row)
    return LoadedPairs(pairs, rows)


def load_table(
    path: str | Path, mapping: ColumnMapping, *, dataset: str | None = None
) -> list[Pair]:
    """The pairs of `read_table`, without their rows."""
    return read_table(path, mapping, dataset=dataset).pairs


def _table_pair(
    record: dict[str, Any], mapping: ColumnMapping, *, file: Path, row: int, dataset: str
) -> Pair:
    """One table row as a pair; every message names the pair field and its column."""

    def text(field: str, column: str, *, optional: bool = False) -> str | None:
        what = f"{field} (column {column!r})"
        return text_field(record, column, file=file, row=row, optional=optional, what=what)

    def required(field: str, column: str) -> str:
        return required_text(
            record, column, file=file, row=row, what=f"{field} (column {column!r})"
        )

    def present(column: str) -> Any:
        if column not in record:
            raise InputError(f"missing column {column!r}", file=str(file), row=row)
        return record[column]

    key = None
    if mapping.key is not None:
        key = _key(present(mapping.key), f"key (column {mapping.key!r})", file=file, row=row)
    metadata = {
        column: json_value(present(column), f"metadata column {column!r}", file=file, row=row)
        for column in mapping.metadata
    }
    if mapping.pair_id is None:
        pair_id = f"{file.stem}-{row}"
    elif isinstance(present(mapping.pair_id), int) and not isinstance(
        record[mapping.pair_id], bool
    ):
        pair_id = str(record[mapping.pair_id])
    else:
        pair_id = required("pair_id", mapping.pair_id)
    return Pair(
        pair_id=pair_id,
        dataset=dataset,
        source=required("source", mapping.source) if mapping.source else file.name,
        question=required("question", mapping.question),
        answer_a=required("answer_a", mapping.answer_a),
        answer_b=required("answer_b", mapping.answer_b),
        key=key,
        reference=text("reference", mapping.reference, optional=True)
        if mapping.reference
        else None,
        metadata=canonical_json(metadata),
    )
