"""The parquet files behind the warehouse's views, each checked before it is read.

A file whose footer cannot be read or that lacks a column of its table (a truncated copy,
a disk that filled up, a stray file) is damaged: the warehouse leaves it out with a warning
naming it, so one damaged run never takes the others down, and reading that run itself is
an IntegrityError naming the file. Only the footer is read, never the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

__all__ = ["TableFile", "damage_of", "list_table_files"]


@dataclass(frozen=True)
class TableFile:
    """One parquet file of a stage table as listed now: where, how big, when written,
    and what is wrong with it (None: readable)."""

    path: Path
    size: int
    mtime_ns: int
    problem: str | None


def damage_of(path: Path, model: type[BaseModel]) -> str | None:
    """What makes `path` unreadable as a table of `model`, or None if its footer reads and
    names every column of the model."""
    try:
        names = set(pq.read_schema(path).names)
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"not a readable parquet file ({type(exc).__name__}: {exc})"[:300]
    missing = [name for name in model.model_fields if name not in names]
    return f"missing columns {missing}" if missing else None


def list_table_files(
    root: Path, pattern: tuple[str, ...], model: type[BaseModel]
) -> list[TableFile]:
    """Every file matching `pattern` under `root`, sorted, each checked."""
    files = []
    for path in sorted(root.glob("/".join(pattern))):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue  # replaced or compacted while listing
        files.append(TableFile(path, stat.st_size, stat.st_mtime_ns, damage_of(path, model)))
    return files
