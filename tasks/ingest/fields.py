"""File reading and field checks that every loader shares.

Every reader takes bytes and decodes UTF-8 strictly, so answer text reaches the manifest
exactly as the file holds it (no stripping, no newline translation). A bad file or row is
an `InputError` naming the file and the 1-based row: the line for `.jsonl`, the record
for a JSON array, the data record (header excluded) for `.csv`, the row for `.parquet`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas import Pair
from schemas.vocabulary import Identity
from tasks.errors import InputError
from tasks.hashing import canonical_json

__all__ = [
    "TOO_DEEP",
    "LoadedPairs",
    "check_unicode",
    "identity_key",
    "iter_jsonl",
    "json_value",
    "read_bytes",
    "required_text",
    "shorten",
    "text_field",
    "type_name",
]

_BOM = b"\xef\xbb\xbf"
_IDENTITIES: dict[str, Identity] = {"A": "A", "B": "B"}
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

    pairs: Sequence[Pair]
    rows: Sequence[int]

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.pairs):
            raise ValueError(f"{len(self.pairs)} pairs but {len(self.rows)} rows")


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


def identity_key(value: Any, label: str, *, file: Path, row: int) -> Identity | None:
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
