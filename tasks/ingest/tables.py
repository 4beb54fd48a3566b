"""Generic tables (jsonl, csv, tsv, parquet) into `Pair`s through a `--map` column mapping.

Every reader takes bytes and decodes UTF-8 strictly, so answer text reaches the manifest
exactly as the file holds it (no stripping, no newline translation). A bad file or row is
an `InputError` naming the file and the 1-based row: the line for `.jsonl`, the record
for a JSON array, the data record (header excluded) for `.csv`, the row for `.parquet`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from schemas import Pair
from tasks.errors import InputError
from tasks.hashing import canonical_json
from tasks.ingest.fields import (
    LoadedPairs,
    identity_key,
    iter_jsonl,
    json_value,
    read_bytes,
    required_text,
    text_field,
)
from tasks.ingest.keyvalues import KeyValues, map_key_value, parse_key_column, split_mapping

__all__ = ["ColumnMapping", "LoadedPairs", "iter_records", "load_table", "read_table"]

_TABLE_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")


# --- generic tables --------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnMapping:
    """Which column of a generic table holds each pair field.

    >>> ColumnMapping.parse("question=prompt,answer_a=resp1,answer_b=resp2,key=label")
    ColumnMapping(pair_id=None, question='prompt', answer_a='resp1', answer_b='resp2', \
key='label', reference=None, source=None, metadata=(), key_values=())

    `metadata` may repeat (`metadata=lang,metadata=topic`) or list columns with `;`. The
    key column may carry a value mapping, `key=label{A>B:A,B>A:B}` (tasks.ingest.keyvalues).
    """

    pair_id: str | None
    question: str
    answer_a: str
    answer_b: str
    key: str | None = None
    reference: str | None = None
    source: str | None = None
    metadata: tuple[str, ...] = ()
    key_values: KeyValues = ()

    @classmethod
    def parse(cls, spec: str) -> ColumnMapping:
        """Parse `field=column,...`; fields are this class's names, spaces around are ignored."""
        known = {f.name for f in fields(cls)} - {"key_values"}
        chosen: dict[str, str] = {}
        metadata: list[str] = []
        key_values: KeyValues = ()
        for item in split_mapping(spec):
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
                parse_key_column(spec, field, column)  # refuses a value mapping here
                metadata.extend(c.strip() for c in column.split(";") if c.strip())
            elif field in chosen:
                raise InputError(f"column mapping {spec!r}: field {field!r} given twice")
            else:
                chosen[field], values = parse_key_column(spec, field, column)
                key_values = values or key_values
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
            key_values=key_values,
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


def _csv_records(lines: Iterator[str], delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(physical line where the record starts, fields) for each non-blank record."""
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
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
    # Long answers exceed csv's default 128 KiB field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    data = read_bytes(path)
    # Decoded as it is read (the whole text in a StringIO took four bytes a character).
    lines = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")
    try:
        yield from _csv_rows(path, columns, lines, strict=True)
    except UnicodeDecodeError:
        # Parse again with the bad bytes kept aside as lone surrogates, to name the record.
        text = data.decode("utf-8", errors="surrogateescape")
        for _ in _csv_rows(path, columns, io.StringIO(text, newline=""), strict=False):
            pass
        raise InputError("invalid UTF-8", file=str(path)) from None  # unreachable


def _csv_rows(
    path: Path, columns: list[str], lines: Iterator[str], *, strict: bool
) -> Iterator[tuple[int, dict[str, Any]]]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    header: list[str] | None = None
    try:
        for number, (line, record) in enumerate(_csv_records(lines, delimiter)):
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
    except UnicodeDecodeError:
        raise  # the strict pass met a bad byte: `_iter_csv` names its record
    except ValueError as exc:
        raise InputError(f"malformed CSV: {exc}", file=str(path)) from None
    if header is None:
        raise InputError("empty file: no header row", file=str(path))


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


def iter_records(path: Path, columns: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based row, record) of a `.jsonl`, `.csv` (`.tsv`) or `.parquet` table whose
    header (csv, parquet) must hold `columns`."""
    reader = _TABLE_READERS.get(path.suffix.lower())
    if reader is None:
        raise InputError(
            f"unknown table format {path.suffix!r}; expected one of {', '.join(_TABLE_SUFFIXES)}",
            file=str(path),
        )
    return reader(path, columns)


def read_table(
    path: str | Path, mapping: ColumnMapping, *, dataset: str | None = None
) -> LoadedPairs:
    """Pairs of a `.jsonl`, `.csv` (`.tsv`) or `.parquet` table through a column mapping,
    with the row of each.

    Without a pair-id column the id is `<file stem>-<row>`; the source defaults to the
    file name, the dataset to the file stem. Mapped `metadata` columns are kept as JSON.
    """
    path = Path(path)
    name = dataset or path.stem
    pairs, rows = [], []
    for row, record in iter_records(path, mapping.columns()):
        pairs.append(_table_pair(record, mapping, file=path, row=row, dataset=name))
        rows.append(row)
    return LoadedPairs(pairs, rows)


def load_table(
    path: str | Path, mapping: ColumnMapping, *, dataset: str | None = None
) -> list[Pair]:
    """The pairs of `read_table`, without their rows."""
    return list(read_table(path, mapping, dataset=dataset).pairs)


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
    if mapping.key is not None and mapping.key_values:
        key = map_key_value(
            present(mapping.key), mapping.key_values, column=mapping.key, file=file, row=row
        )
    elif mapping.key is not None:
        key = identity_key(
            present(mapping.key), f"key (column {mapping.key!r})", file=file, row=row
        )
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
