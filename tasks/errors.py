"""The errors judgeline raises for bad input and failed checks.

JudgelineError            one readable paragraph; the CLI prints it without a traceback and
│                         exits with its `exit_code` (2: bad input, unless it says otherwise)
├── InputError            a bad input file or row (names the file and the row)
├── IntegrityError        stored data that does not match its own hash or contract
├── StoreError            the work dir's object store refused or failed a request
│   └── StoreUnreachable  ... left it unanswered for the whole patience
├── GateError             a data-quality gate between stages failed (names the rows)
└── Interrupted           a stage stopped on SIGINT or SIGTERM after storing what it had
    │                     (or, exit 75, because its Prefect server went away: `stop_for`)
    ├── DiskFull          ... or because the work dir's file system is full
    └── StoreDown         ... or because the work dir's object store stopped answering
"""

from __future__ import annotations

import signal
from typing import Any


class JudgelineError(Exception):
    """Base of every error meant for the user rather than for a developer."""

    exit_code = 2


_stop_cause: list[str] = []
"""Why this process sent itself SIGTERM, when it did (`stop_for`)."""


def stop_for(cause: str) -> None:
    """Say why this process is about to stop itself with SIGTERM (its Prefect server went
    away): an `Interrupted` for that signal then names the cause and exits 75 (try again
    later), not 143."""
    _stop_cause[:] = [cause]


def stop_cause(signum: int) -> str | None:
    """The cause `stop_for` gave, for SIGTERM; None for a signal from outside."""
    return _stop_cause[0] if _stop_cause and signum == signal.SIGTERM else None


STOPPED: dict[str, Interrupted] = {}
"""The `Interrupted` raised for each run a stop of this process's own (`stop_for`) ended:
what its record says, even should Prefect keep the exception from reaching the record's
keeper (`flows.serverwatch`)."""


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


class StoreUnreachable(StoreError):
    """The object store did not answer a request (a lost link, 5xx replies) for as long as
    requests are retried (`tasks.store.objects.store_patience`)."""


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

    `exit_code` is the shell's for that signal (130 for SIGINT, 143 for SIGTERM), or 75 for
    a stop this process made itself (`stop_for`); `rerun-failed RUN` resumes the run.
    """

    def __init__(self, run_id: str, signum: int, counts: dict[str, Any]) -> None:
        self.run_id = run_id
        self.resume: str | None = None
        """The command that resumes it, when it is not `rerun-failed RUN` (the demo's)."""
        self.signum = signum
        cause = stop_cause(signum)
        self.exit_code = 75 if cause else 128 + signum
        self.counts = counts
        if cause:
            STOPPED[run_id] = self
        name = f"because {cause}" if cause else f"by {signal.Signals(signum).name}"
        if "planned" not in counts:
            said = (
                f"run {run_id} interrupted {name} before its judge stage ended; every "
                "reply stored so far is kept"
            )
        else:
            said = (
                f"run {run_id} interrupted {name}: "
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


def _kept(counts: dict[str, Any], journal: str) -> str:
    """What a judge stage that stopped mid-way kept: the replies received (in `journal`), the
    calls whose results wait at a provider, and the replies it could not keep."""
    said = f"the {counts.get('stored', 0)} replies received are kept in {journal}"
    if counts.get("at_provider"):
        said += (
            f"; the {counts['at_provider']} calls of {counts.get('provider_batches', 0)} "
            "provider batches are kept by the provider: the resume fetches their results "
            "instead of sending them again"
        )
    if counts.get("unjournaled"):
        said += (
            f" (batch {', '.join(counts['unjournaled'])} could not be journaled: the resume "
            "finds an OpenAI batch by its metadata, an Anthropic one is submitted again)"
        )
    if counts.get("unkept"):
        said += f"; {counts['unkept']} replies received could not be kept and are sent again"
    return (
        f"{said} ({counts.get('planned', 0)} planned calls, "
        f"{counts.get('pending', 0)} not sent yet)"
    )


def _after_judging(counts: dict[str, Any]) -> str:
    """A run stopped outside its judge stage's sending: what it has stored."""
    if "planned" not in counts:
        return "every reply received is kept"
    stored, planned = counts.get("stored", 0), counts["planned"]
    return f"every reply is kept ({stored} of {planned} planned calls stored)"


class DiskFull(Interrupted):
    """A run stopped at the first write refused for want of space, in any stage, after
    keeping every reply it received: while judging, in its journal (published by the next
    run once there is space); outside (not `judging`: `writing` names the file if known),
    they are all stored.

    `exit_code` is 75 (EX_TEMPFAIL: try again later); `counts` has the run's `planned`
    calls, the replies it `stored` (in the journal) and the calls `pending` (not sent), and
    for the provider batch sender the calls `at_provider` (`tasks.judging.stopping`).
    """

    def __init__(
        self,
        run_id: str,
        where: str,
        counts: dict[str, Any],
        *,
        judging: bool = True,
        writing: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.resume = None
        self.exit_code = 75
        self.counts = counts
        if not judging:
            file = f" (writing {writing})" if writing else ""
            message = (
                f"run {run_id} stopped: no space left on {where}{file}; {_after_judging(counts)}"
            )
        elif not counts.get("sent"):
            message = f"run {run_id} stopped before sending a call: no space left on {where}"
        else:
            kept = _kept(counts, "the work dir's journal")
            message = (
                f"run {run_id} stopped: no space left on {where}; no call started after that, "
                f"and {kept}"
            )
        JudgelineError.__init__(self, f"{message}; free space there")


class StoreDown(Interrupted):
    """A run stopped because the work dir's object store did not answer for the whole
    patience, after keeping every reply it received: in the judge stage, in this machine's
    journal (published by the next run on this machine once the store answers); later
    (`journal` None), they are all stored. As `DiskFull`: exit code 75 and the counts.
    """

    def __init__(
        self, run_id: str, reason: str, journal: str | None, counts: dict[str, Any]
    ) -> None:
        self.run_id = run_id
        self.resume = None
        self.exit_code = 75
        self.counts = counts
        if journal is None:
            message = f"run {run_id} stopped: {reason}; {_after_judging(counts)}"
        elif not counts.get("sent"):
            message = f"run {run_id} stopped before sending a call: {reason}"
        else:
            kept = _kept(counts, f"this machine's journal ({journal}) until the store has them")
            message = f"run {run_id} stopped: {reason}; no call started after that, and {kept}"
        JudgelineError.__init__(
            self, f"{message}; run the resume command on this machine once the store answers"
        )
