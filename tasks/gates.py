"""Data-quality gates between stages: great-expectations suites run in an ephemeral context.

A stage builds its suite in code (one function per table), computes any derived check
columns in pandas first (for example "stored SHA-256 equals the hash of the stored bytes"),
and calls `run_gate`. A failed gate raises GateError listing each failed expectation with
its unexpected count and the ids of the first offending rows; checks that repeat one
expectation are validated once and share its result.

A table that must be validated goes to the command's gate runner: a child process
(`python -m tasks.gates`) started on the first gate with new data to check (or by
`preload_great_expectations`), which imports great-expectations on the other core while the
command goes on, and answers over its pipes. Where it cannot (it failed to start, a table it
would not see as it is), the gate runs in the command itself, with the same results.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.errors import GateError
from tasks.gate_allowlist import GateRequestError, check_expectation, read_head
from tasks.storage import write_text_atomic

if TYPE_CHECKING:  # imported where used: the command line imports this module's names
    import pandas as pd

_lock = threading.Lock()
_counter = itertools.count()
_context: Any = None


def preload_great_expectations() -> None:
    """Start the gate runner now (it imports great-expectations, seconds of CPU, on the other
    core), for a gate that will run after slow input and output: the judge stage calls this
    when it has calls to send, so the remap gate finds the library loaded."""
    with _runner_lock:
        _gate_runner()


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


class Expect:
    """A great-expectations expectation named by its class and arguments, built only when a
    gate runs (`import great_expectations` costs seconds; a gate whose table already passed
    never pays it). Only the kinds and arguments in `ALLOWED` can be made, checked here,
    before anything is built, wherever the request came from."""

    def __init__(self, kind: str, **kwargs: Any) -> None:
        check_expectation(kind, kwargs)
        self.kind = kind
        self.kwargs = kwargs

    @property
    def key(self) -> str:
        """Its identity: two expectations with the same key are one (a suite holds it once)."""
        return json.dumps([self.kind, self.kwargs], sort_keys=True, default=str)

    def build(self) -> Any:
        import great_expectations as gx

        return getattr(gx.expectations, self.kind)(**self.kwargs)


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
    distinct, slots = _distinct(checks)
    results = _runner_results(stage, df, distinct)
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


def gx_results(stage: str, df: pd.DataFrame, distinct: list[Expect]) -> list[dict[str, Any]]:
    """Validate `df` against the distinct expectations with great-expectations: one plain
    result per expectation, in order (success, unexpected count, the positions or values of
    the first five offending rows, the error of a check that could not run)."""
    import great_expectations as gx

    with _lock:
        ctx = _gx_context()
        n = next(_counter)
        source = ctx.data_sources.add_pandas(name=f"{stage}-{n}")
        asset = source.add_dataframe_asset(name=f"{stage}-asset-{n}")
        batch = asset.add_batch_definition_whole_dataframe(f"{stage}-batch-{n}")
        suite = ctx.suites.add(gx.ExpectationSuite(name=f"{stage}-suite-{n}"))
        for expectation in distinct:
            suite.add_expectation(expectation.build())
        validation = gx.ValidationDefinition(data=batch, suite=suite, name=f"{stage}-val-{n}")
        result = validation.run(
            batch_parameters={"dataframe": df.reset_index(drop=True)},
            result_format="COMPLETE",
        )
    plain: list[dict[str, Any]] = []
    # One result per distinct expectation, in the suite's order.
    for _, res in zip(distinct, result.results, strict=True):
        detail = res.result or {}
        idx = detail.get("unexpected_index_list") or []
        positions = [i if isinstance(i, int) else i.get("index") for i in idx[:5]]
        error = None
        if res.exception_info and res.exception_info.get("raised_exception"):
            error = str(res.exception_info.get("exception_message"))
        plain.append({
            "success": bool(res.success),
            "unexpected_count": detail.get("unexpected_count"),
            "positions": [p for p in positions if isinstance(p, int)],
            "partial": [repr(v) for v in (detail.get("partial_unexpected_list") or [])[:5]],
            "error": error,
        })  # fmt: skip
    return plain


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


def _plain_kwargs(expectation: Expect) -> bool:
    try:
        return json.loads(json.dumps(expectation.kwargs)) == expectation.kwargs
    except (TypeError, ValueError):
        return False


def gate_request(stage: str, df: pd.DataFrame, distinct: list[Expect]) -> bytes | None:
    """The body of a gate runner's request: a JSON line (stage and expectations), then the
    table as an Arrow stream; None when the runner would not see the same table (a column that
    does not come back from Arrow with its dtype) or an expectation's arguments are not plain
    JSON."""
    import pandas as pd
    import pyarrow as pa

    if not all(_plain_kwargs(e) for e in distinct):
        return None
    frame = df.reset_index(drop=True)
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    # Object columns come back as the Python values they hold (`answer_gate`); every other
    # column must come back from Arrow with its own dtype.
    objects = [str(c) for c, dtype in frame.dtypes.items() if pd.api.types.is_object_dtype(dtype)]
    typed = [i for i, dtype in enumerate(frame.dtypes) if not pd.api.types.is_object_dtype(dtype)]
    back = table.select(typed).to_pandas().dtypes
    if list(back) != [frame.dtypes.iloc[i] for i in typed]:
        return None
    head = {
        "stage": stage,
        "expectations": [[e.kind, e.kwargs] for e in distinct],
        "objects": objects,
    }
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return json.dumps(head).encode() + b"\n" + sink.getvalue().to_pybytes()


def answer_gate(body: bytes) -> bytes:
    """Run a gate runner's request (`gate_request`) here: its results as JSON. The request
    is checked (`read_head`) before the table is read or anything is built."""
    import pandas as pd
    import pyarrow as pa

    head_line, _, stream = body.partition(b"\n")
    stage, wanted, objects = read_head(head_line)
    distinct = [Expect(kind, **kwargs) for kind, kwargs in wanted]
    try:
        table = pa.ipc.open_stream(stream).read_all()
    except (pa.ArrowException, OSError, ValueError):
        raise GateRequestError("a gate's table is one Arrow stream") from None
    df = pd.DataFrame({
        name: pd.Series(column.to_pylist(), dtype=object) if name in objects
        else column.to_pandas()
        for name, column in zip(table.column_names, table.columns, strict=True)
    })  # fmt: skip
    return json.dumps(gx_results(stage, df, distinct)).encode()


_runner: subprocess.Popen[bytes] | None = None
_runner_lock = threading.Lock()
_runner_failed = False
"""A runner that could not start or answer is not tried again: the gates run here."""


def _gate_runner() -> subprocess.Popen[bytes] | None:
    """This command's gate runner, started on first use (call with `_runner_lock` held): a
    child process reading requests on its standard input, whose pipes only this process
    holds, with none of the command's secrets in its environment."""
    global _runner, _runner_failed
    if _runner is None and not _runner_failed:
        keep = ("PATH", "HOME", "USER", "LANG", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
                "LD_LIBRARY_PATH")  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k in keep or k.startswith("LC_")}
        try:
            _runner = subprocess.Popen(
                [sys.executable, "-m", "tasks.gates"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            )  # fmt: skip
        except OSError:
            _runner_failed = True
            return None
        atexit.register(_runner.kill)
    return _runner


def _frame(data: bytes) -> bytes:
    return struct.pack(">Q", len(data)) + data


def _read_frame(stream: Any) -> bytes | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = struct.unpack(">Q", head)[0]
    data = stream.read(size)
    return data if len(data) == size else None


def _runner_results(
    stage: str, df: pd.DataFrame, distinct: list[Expect]
) -> list[dict[str, Any]] | None:
    """The results from this command's gate runner, or None (a table it would not see as it
    is, a runner that could not start or answer): the gate then runs here."""
    global _runner_failed
    body = gate_request(stage, df, distinct)
    if body is None:
        return None
    with _runner_lock:
        runner = _gate_runner()
        if runner is None or runner.stdin is None or runner.stdout is None:
            return None
        try:
            runner.stdin.write(_frame(body))
            runner.stdin.flush()
            reply = _read_frame(runner.stdout)
            results = json.loads(reply) if reply is not None else None
        except (OSError, ValueError):
            results = None
        if not isinstance(results, list) or len(results) != len(distinct):
            _runner_failed = True
            runner.kill()
            return None
    return results


def serve_gates() -> None:
    """The gate runner's loop (`python -m tasks.gates`): import great-expectations, then
    answer each request (`answer_gate`) until the command closes its end of the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command handles Ctrl-C
    with contextlib.suppress(OSError):
        os.nice(10)  # while it loads, the command's own work comes first
    _gx_context()
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while (body := _read_frame(source)) is not None:
        try:
            reply = answer_gate(body)
        except GateRequestError as exc:
            reply = json.dumps({"error": str(exc)}).encode()
        sink.write(_frame(reply))
        sink.flush()


if __name__ == "__main__":
    serve_gates()
