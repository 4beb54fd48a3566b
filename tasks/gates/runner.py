"""The command's gate runner: a child process (`python -m tasks.gates`) that validates
tables for `tasks.gates`, started on the first gate with new data to check (or by
`tasks.gates.preload_great_expectations`). It imports great-expectations (seconds of CPU) on
the other core while the command goes on, reads requests (`gate_request`) on its
standard input and answers on its output: pipes only the command holds, and none of the
command's secrets in its environment. A runner that cannot start or answer is not tried again:
the gates then run in the command, with the same results."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from tasks.gates.allowlist import Expect, GateRequestError, read_head

if TYPE_CHECKING:
    import pandas as pd

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


def runner_results(
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


def start_runner() -> None:
    """Start the runner now, if it is not running."""
    with _runner_lock:
        _gate_runner()
