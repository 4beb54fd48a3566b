"""The `judgeline` command line: one subcommand per user job, each a thin call into flows/.

`flows.cli.app` holds the Typer app; each other module of this package registers one
group of subcommands on it when imported.
"""

from __future__ import annotations

import errno
import inspect
import sys
from pathlib import Path
from typing import NoReturn

from rich.markup import escape

# Imported for their registrations: each module adds its subcommands to `app`.
from flows.cli import (  # noqa: F401
    advise,
    demo,
    estimate,
    failures,
    history,
    imports,
    judge,
    leaderboard,
    live,
    prepare,
    remap,
    replay,
    run,
    server,
    simjudge,
)
from flows.cli.app import app, err_console, resume_line, state
from flows.serverwatch import last_line
from tasks.errors import Interrupted, JudgelineError, StoreUnreachable
from tasks.store.workdir import cannot_write, describe_filesystem, disk_full

__all__ = ["app", "main"]


def _one_line_summaries() -> None:
    """Each command's line in `judgeline --help`: the first paragraph of its docstring as one
    line that the terminal wraps (Typer kept the docstring's line breaks there, which cut
    sentences: "Exits as" / "`run` does")."""
    for info in app.registered_commands:
        if info.short_help is None and info.help is None and info.callback is not None:
            first = (inspect.getdoc(info.callback) or "").split("\n\n")[0]
            info.short_help = " ".join(first.split()) or None


_one_line_summaries()


def _unwritable(exc: OSError) -> bool:
    return cannot_write(exc) or exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _cannot_write(exc: OSError) -> str:
    """A write that failed (a read-only work dir, a full disk) as one line naming where."""
    path = Path(str(exc.filename)) if exc.filename else None
    if path is not None and path.name.startswith(".") and path.name.endswith(".tmp"):
        path = path.parent  # the temporary file an atomic write starts with
    where = f"in {path}" if path is not None and path.is_dir() else str(path or "a file")
    return (
        f"cannot write {where} ({exc.strerror}); the commands that only read (`runs`, `show`, "
        "`failures`, `diff`) need no write"
    )


def _no_space(exc: OSError) -> str:
    """A write a full disk refused, outside any run, as one line naming the file system."""
    path = Path(str(exc.filename)) if exc.filename else None
    where = describe_filesystem(path or state.work.root)
    writing = f" (writing {path})" if path is not None else ""
    return f"no space left on {where}{writing}; free space there and run the command again"


def _again(line: str) -> NoReturn:
    """A command stopped by a full disk or an absent store: not bad input, a temporary
    failure (exit 75, EX_TEMPFAIL), said in one line."""
    err_console.print(escape(line), highlight=False, soft_wrap=True)
    raise SystemExit(75) from None


def main() -> None:
    """Console entry point: user errors print as one paragraph, tracebacks only with --debug,
    and exit with the error's code (2: bad input; 75: a local server that cannot start; 78:
    one that cannot be checked); a stage stopped by SIGINT or SIGTERM prints one line and
    exits 130 or 143, one stopped by a full disk, an absent object store or its Prefect
    server going away one line and 75."""
    try:
        app()
    except Interrupted as exc:
        if "--debug" in sys.argv:
            raise
        last_line()
        err_console.print(
            f"{escape(str(exc))}; resume with: {escape(exc.resume or resume_line(exc.run_id))}",
            highlight=False,
            soft_wrap=True,
        )
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        err_console.print("interrupted", highlight=False)
        raise SystemExit(130) from None
    except OSError as exc:
        if "--debug" in sys.argv or not _unwritable(exc):
            raise
        if disk_full(exc):
            _again(_no_space(exc))
        err_console.print(
            f"[bold red]error:[/bold red] {escape(_cannot_write(exc))}",
            highlight=False,
            soft_wrap=True,
        )
        raise SystemExit(2) from None
    except StoreUnreachable as exc:
        if "--debug" in sys.argv:
            raise
        _again(f"{exc}; run the command again once the store answers")
    except JudgelineError as exc:
        if "--debug" in sys.argv:
            raise
        # Messages quote file contents (values, column names, ids): escaped, a `[/x]` in
        # them is text, not rich markup that would crash or vanish.
        last_line()
        err_console.print(
            f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        raise SystemExit(exc.exit_code) from None
