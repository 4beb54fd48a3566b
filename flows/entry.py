"""The `judgeline` console script: the command line of `flows.cli`, ending without tearing
the interpreter down.

A command that ran a flow has imported Prefect, pandas, pyarrow, DuckDB and great-expectations;
freeing all of that module by module at exit cost about half a second of every command.
Once every exit handler registered after this one has run (Prefect's drains of its events
and logs, logging's flush, temporary files' clean-up, with non-daemon threads joined before
any of them), nothing is left that the process owes anyone: it flushes its streams and
leaves with the command's exit code.

A command imports a few thousand modules and builds their classes and pydantic models: with
the interpreter's default thresholds, the cyclic garbage collector ran its passes over all of
them again and again while they were being made (0.2 s of CPU of a 3 s run). It runs a
pass every 50,000 allocations instead of 700, which leaves a command's garbage in cycles
(its only kind the collector frees) a few megabytes at most before a pass.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import sys

_exit_code: list[int] = []


def _leave() -> None:
    """The last exit handler (the first registered)."""
    if not _exit_code:
        return  # an uncaught exception: the interpreter reports and tears down as usual
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(_exit_code[0])


GC_THRESHOLDS = (50_000, 20, 100)


def main() -> None:
    atexit.register(_leave)  # before anything else is imported: it runs after their handlers
    gc.set_threshold(*GC_THRESHOLDS)
    from flows.cli import main as run_command
    from flows.serverwatch import WATCHING

    WATCHING.append(True)  # this process is a command: one its server's loss may end

    try:
        run_command()
    except SystemExit as exc:
        code = exc.code
        _exit_code.append(code if isinstance(code, int) else 0 if code is None else 1)
        raise
    _exit_code.append(0)
