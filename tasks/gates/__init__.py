"""Data-quality gates between stages: great-expectations suites run in an ephemeral context.

A stage builds its suite in code (one function per table), computes any derived check
columns in pandas first (for example "stored SHA-256 equals the hash of the stored bytes"),
and calls `run_gate`. A failed gate raises GateError listing each failed expectation with
its unexpected count and the ids of the first offending rows; checks that repeat one
expectation are validated once and share its result.

A table that must be validated goes to the command's gate runner (`tasks.gates.runner`), a
child process that imports great-expectations on the other core while the command goes on;
where it cannot answer, the gate runs in the command itself, with the same results.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.errors import GateError
from tasks.gates.allowlist import Expect
from tasks.gates.runner import gx_results
from tasks.storage import write_text_atomic

if TYPE_CHECKING:  # imported where used: the command line imports this module's names
    import pandas as pd


def preload_great_expectations() -> None:
    """Start the gate runner now (it imports great-expectations, seconds of CPU, on the other
    core), for a gate that will run after slow input and output: the judge stage calls this
    when it has calls to send, so the remap gate finds the library loaded."""
    from tasks.gates.runner import start_runner

    start_runner()


@dataclass(frozen=True)
class Check:
    """One expectation plus the sentence a user reads when it fails."""

    expectation: Expect
    says: str


def _table_digest(df: pd.DataFrame, checks: list[Check], id_column: str) -> str | None:
    """SHA-256 of the table's Arrow bytes and of the expectations (not their sentences,
    which may name the run: a pass is a pass), or None if the table cannot be serialised
    (the gate then simply runs)."""
    import pyarrow as pa

    digest = hashlib.sha256()
    keys = sorted({c.expectation.key for c in checks})
    digest.update(json.dumps([id_column, keys]).encode())
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    digest.update(sink.getvalue())
    return digest.hexdigest()


def run_gate(
    stage: str,
    df: pd.DataFrame,
    checks: list[Check],
    *,
    id_column: str,
    memo_dir: Path | None = None,
) -> None:
    """Validate `df` against `checks`; raise GateError naming offending rows by `id_column`.

    With `memo_dir`, a table that already passed these checks (the same bytes, see
    `_table_digest`) is not validated again: a rerun over cached replies re-gates nothing.
    """
    memo = None
    if memo_dir is not None:
        digest = _table_digest(df, checks, id_column)
        memo = memo_dir / f"table-{digest}" if digest is not None else None
        if memo is not None and memo.is_file():
            return
    _validate(stage, df, checks, id_column=id_column)
    if memo is not None:
        write_text_atomic("", memo, overwrite=True)


def _validate(stage: str, df: pd.DataFrame, checks: list[Check], *, id_column: str) -> None:
    from tasks.gates.runner import runner_results

    distinct, slots = _distinct(checks)
    results = runner_results(stage, df, distinct)
    if results is None:
        results = gx_results(stage, df, distinct)
    failures: list[str] = []
    ids = df[id_column].reset_index(drop=True) if id_column in df.columns else None
    for check, slot in zip(checks, slots, strict=True):
        res = results[slot]
        if res["success"]:
            continue
        count = res["unexpected_count"]
        examples: list[str] = []
        if ids is not None and res["positions"]:
            examples = [str(ids.iloc[p]) for p in res["positions"]]
        elif res["partial"]:
            examples = res["partial"]
        msg = check.says
        if count is not None:
            msg += f" ({count} row{'s' if count != 1 else ''}"
            msg += f"; {id_column} {', '.join(examples)})" if examples else ")"
        elif res["error"]:
            msg += f" (check could not run: {res['error']})"
        failures.append(msg)
    if failures:
        raise GateError(stage, list(dict.fromkeys(failures)))


def _distinct(checks: list[Check]) -> tuple[list[Expect], list[int]]:
    """The distinct expectations of `checks`, and each check's position among them: a suite
    holds an expectation once, so checks repeating one share its result."""
    distinct: list[Expect] = []
    slots: list[int] = []
    where: dict[str, int] = {}
    for check in checks:
        key = check.expectation.key
        if key not in where:
            where[key] = len(distinct)
            distinct.append(check.expectation)
        slots.append(where[key])
    return distinct, slots


def _files_digest(files: list[Path]) -> str | None:
    digest = hashlib.sha256()
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def gate_once(memo_dir: Path, files: list[Path], gate: Callable[[], None]) -> None:
    """Run `gate` unless these exact file bytes already passed it.

    Stored manifests and plans are immutable, and every stage reads them again: the memo
    keeps a 100,000-row plan from being re-validated on every read, while any changed byte
    (a hand edit, a tampered answer) changes the digest and the gate runs again. A memo is an
    empty file named by the digest in `memo_dir`, away from the gated folders (reading a
    manifest never changes its folder).
    """
    before = _files_digest(files)
    memo = memo_dir / before if before is not None else None
    if memo is not None and memo.is_file():
        return
    gate()
    if memo is not None and _files_digest(files) == before:
        write_text_atomic("", memo, overwrite=True)
