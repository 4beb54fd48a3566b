"""Data-quality gates between stages: great-expectations suites run in an ephemeral context.

A stage builds its suite in code (one function per table), computes any derived check
columns in pandas first (for example "stored SHA-256 equals the hash of the stored bytes"),
and calls `run_gate`. A failed gate raises GateError listing each failed expectation with
its unexpected count and the ids of the first offending rows; checks that repeat one
expectation are validated once and share its result.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.errors import GateError
from tasks.storage import write_text_atomic

_lock = threading.Lock()
_counter = itertools.count()
_context: Any = None


def _gx_context() -> Any:
    """One ephemeral context per process, with progress bars off."""
    global _context
    if _context is None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        # Its modules set their own loggers to INFO at import ("Created temporary directory
        # ... for ephemeral docs site" on every run): quiet each, not only the parent.
        for name in list(logging.root.manager.loggerDict):
            if name == "great_expectations" or name.startswith("great_expectations."):
                logging.getLogger(name).setLevel(logging.ERROR)
        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        _context = ctx
    return _context


@dataclass(frozen=True)
class Check:
    """One expectation plus the sentence a user reads when it fails."""

    expectation: Any
    says: str


def run_gate(stage: str, df: pd.DataFrame, checks: list[Check], *, id_column: str) -> None:
    """Validate `df` against `checks`; raise GateError naming offending rows by `id_column`."""
    import great_expectations as gx

    with _lock:
        ctx = _gx_context()
        n = next(_counter)
        source = ctx.data_sources.add_pandas(name=f"{stage}-{n}")
        asset = source.add_dataframe_asset(name=f"{stage}-asset-{n}")
        batch = asset.add_batch_definition_whole_dataframe(f"{stage}-batch-{n}")
        suite = ctx.suites.add(gx.ExpectationSuite(name=f"{stage}-suite-{n}"))
        distinct, slots = _distinct(checks)
        for expectation in distinct:
            # An expectation belongs to one suite; gates are reused, so add a fresh copy.
            fresh = copy.copy(expectation)
            fresh.id = None
            suite.add_expectation(fresh)
        validation = gx.ValidationDefinition(data=batch, suite=suite, name=f"{stage}-val-{n}")
        result = validation.run(
            batch_parameters={"dataframe": df.reset_index(drop=True)},
            result_format="COMPLETE",
        )
    failures: list[str] = []
    ids = df[id_column].reset_index(drop=True) if id_column in df.columns else None
    # One result per distinct expectation, in the suite's order.
    results = [res for _, res in zip(distinct, result.results, strict=True)]
    for check, slot in zip(checks, slots, strict=True):
        res = results[slot]
        if res.success:
            continue
        detail = res.result or {}
        count = detail.get("unexpected_count")
        idx = detail.get("unexpected_index_list") or []
        examples: list[str] = []
        if ids is not None and idx:
            positions = [i if isinstance(i, int) else i.get("index") for i in idx[:5]]
            examples = [str(ids.iloc[p]) for p in positions if isinstance(p, int)]
        elif detail.get("partial_unexpected_list"):
            examples = [repr(v) for v in detail["partial_unexpected_list"][:5]]
        msg = check.says
        if count is not None:
            msg += f" ({count} row{'s' if count != 1 else ''}"
            msg += f"; {id_column} {', '.join(examples)})" if examples else ")"
        elif res.exception_info and res.exception_info.get("raised_exception"):
            msg += f" (check could not run: {res.exception_info.get('exception_message')})"
        failures.append(msg)
    if failures:
        raise GateError(stage, list(dict.fromkeys(failures)))


_NOT_COMPARED = {"id", "rendered_content", "notes", "meta"}
"""Fields two expectations may differ in and still be one (as a suite tells them apart)."""


def _distinct(checks: list[Check]) -> tuple[list[Any], list[int]]:
    """The distinct expectations of `checks`, and each check's position among them: a suite
    holds an expectation once, so checks repeating one share its result."""
    distinct: list[Any] = []
    slots: list[int] = []
    for check in checks:
        mine = check.expectation
        same = (
            i
            for i, e in enumerate(distinct)
            if e.expectation_type == mine.expectation_type
            and e.dict(exclude=_NOT_COMPARED) == mine.dict(exclude=_NOT_COMPARED)
        )
        slot = next(same, len(distinct))
        if slot == len(distinct):
            distinct.append(mine)
        slots.append(slot)
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
