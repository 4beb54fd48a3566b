"""The errors judgeline raises for bad input and failed checks.

JudgelineError            one readable paragraph; the CLI prints it without a traceback
├── InputError            a bad input file or row (names the file and the row)
├── IntegrityError        stored data that does not match its own hash or contract
├── GateError             a data-quality gate between stages failed (names the rows)
└── Interrupted           a stage stopped on SIGINT or SIGTERM after storing what it had
"""

from __future__ import annotations

import signal
from typing import Any


class JudgelineError(Exception):
    """Base of every error meant for the user rather than for a developer."""


class InputError(JudgelineError):
    """Bad input: names the file, the row (1-based line or record number) and the problem."""

    def __init__(self, problem: str, *, file: str | None = None, row: int | str | None = None):
        self.file = file
        self.row = row
        self.problem = problem
        where = []
        if file is not None:
            where.append(str(file))
        if row is not None:
            where.append(f"row {row}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + problem)


class StoreError(JudgelineError):
    """The object store holding the work dir refused or failed a request (credentials, a
    missing bucket, the network); the message names the store, the request and its reason."""


class IntegrityError(JudgelineError):
    """Stored data disagrees with its hash, its sidecar or another stored table."""


class GateError(JudgelineError):
    """A data-quality gate failed; the message lists each failed check with examples."""

    def __init__(self, stage: str, failures: list[str]):
        self.stage = stage
        self.failures = failures
        lines = "\n".join(f"  - {f}" for f in failures)
        super().__init__(f"{stage}: data-quality gate failed:\n{lines}")


class Interrupted(JudgelineError):
    """The judge stage stopped on a signal after storing every reply it received.

    `exit_code` is the shell's for that signal (130 for SIGINT, 143 for SIGTERM); the same
    command with `--run-id run_id` resumes the run.
    """

    def __init__(self, run_id: str, signum: int, counts: dict[str, Any]) -> None:
        self.run_id = run_id
        self.resume: str | None = None
        """The command that resumes it, when it is not `rerun-failed RUN` (the demo's)."""
        self.signum = signum
        self.exit_code = 128 + signum
        self.counts = counts
        name = signal.Signals(signum).name
        if "planned" not in counts:
            said = (
                f"run {run_id} interrupted by {name} before its judge stage ended; every "
                "reply stored so far is kept"
            )
        else:
            said = (
                f"run {run_id} interrupted by {name}: "
                f"{counts.get('stored', 0)} of {counts.get('planned', 0)} planned calls stored "
                f"(replies in flight were kept), {counts.get('failed', 0)} failed, "
                f"{counts.get('pending', 0)} not sent yet"
            )
        super().__init__(said)


def describe_validation(exc: Any) -> str:
    """A pydantic ValidationError as one line, `field: problem; ...`, unknown fields named as
    such (pydantic's own text spans lines and ends each with a documentation URL)."""
    if not callable(getattr(exc, "errors", None)):
        return str(exc)  # e.g. a UnicodeDecodeError met while reading the file
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        problems.append(
            f"{where}: {'unknown field' if err['type'] == 'extra_forbidden' else err['msg']}"
        )
    return "; ".join(problems)
