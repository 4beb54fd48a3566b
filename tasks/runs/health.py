"""A run's health: per judge config, how many planned slots got a valid outcome and why the
others did not, and the run's status from that (docs/design.md#run-status).

A run is `failed` when no judge config has a single valid outcome (`A`, `B` or `T`),
`degraded` when a config got no reply to more than `MISSING_SHARE` of its calls, has fewer
than `VALID_SHARE` valid outcomes, or was stopped by its breaker, and `completed`
otherwise. The reasons name, per config, the failure category, its count and the provider's
first message, and a breaker stop with the calls it held back.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas.judge import JudgeSpec
from schemas.run import ConfigHealth, RunStatus
from tasks.errors import JudgelineError
from tasks.judging.cache import read_attempts
from tasks.prompts.parsing import TRUNCATED_NOTE
from tasks.runs.folder import RunFolder

__all__ = [
    "EXIT_CODES",
    "MESSAGE_CHARS",
    "MISSING_SHARE",
    "NOT_RECORDED",
    "UNREADABLE",
    "VALID_SHARE",
    "RunNotCompleted",
    "describe",
    "raise_unless_completed",
    "reasons",
    "run_health",
    "run_status",
    "stop_line",
]

MISSING_SHARE = 0.1
"""A judge config whose calls got no reply (failed, or never sent) for more than this share
of its planned slots makes the run `degraded`: `rerun-failed` can mend it."""
VALID_SHARE = 0.5
"""A judge config with fewer valid outcomes than this share of its planned slots makes the
run `degraded` too: it answers, but mostly unparsable, abstaining or invalid replies (a
wrong template, replies cut by the token limit). Invalid and abstained replies below that
are the judge's own behaviour, shown in the disclosure, not a failure of the run."""


def short(h: ConfigHealth) -> bool:
    """True if the config makes its run `degraded`: too many calls without a reply, too few
    valid outcomes, or a breaker stop."""
    missing = sum(h.failed.values()) + h.pending
    return bool(h.stopped) or missing > MISSING_SHARE * h.planned or h.share < VALID_SHARE


MESSAGE_CHARS = 300
"""A provider message is shown up to this many characters, on one line."""

NOT_RECORDED = "not_recorded"
"""The category of a failed call with none: a judgment another tool recorded without a reply
(docs/design.md#imported-judgments)."""
UNREADABLE = "unreadable"
"""The category of a call the judge stage stored whose reply remap could not read (its cache
file was damaged in between): `rerun-failed` sends it again."""
EXIT_CODES: dict[RunStatus, int] = {"completed": 0, "degraded": 3, "failed": 4}
"""The CLI's exit code per run status (2 is a bad input, 1 an unexpected error)."""

VALID = ("A", "B", "T")

FIX = {
    "auth": "fixing the key",
    "quota": "adding credit or raising the quota",
    "bad_request": "fixing the request (model name, decoding fields)",
}
"""What to fix before resending the calls a breaker held back, per category."""


class RunNotCompleted(JudgelineError):
    """A run ended `degraded` or `failed`; raised after everything is written, so the flow
    run ends Failed. The message is the reasons, one line per judge config; `result` is what
    the job returns when the run completes (its counts), for the command line to show too."""

    def __init__(
        self,
        run_id: str,
        status: RunStatus,
        lines: list[str],
        result: dict[str, Any] | None = None,
    ) -> None:
        self.run_id = run_id
        self.status = status
        self.lines = lines
        self.result = result
        super().__init__("\n".join(lines))


def _one_line(text: str | None) -> str | None:
    if not text:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 1] + "…"


def _first_messages(
    folder: RunFolder, failed_keys: dict[tuple[str, str], set[str]]
) -> dict[tuple[str, str], dict[str, str]]:
    """Per (judge, config) and category: the detail of the earliest failed attempt of the
    config's failed calls in that category."""
    if not failed_keys:
        return {}
    owner = {k: jc for jc, keys in failed_keys.items() for k in keys}
    attempts = read_attempts(folder.work)
    keep = pc.is_in(attempts.column("call_key"), value_set=pa.array(list(owner), pa.string()))
    rows = attempts.filter(keep).sort_by([("started_at", "ascending"), ("attempt", "ascending")])
    first: dict[tuple[str, str], dict[str, str]] = {}
    for key, ok, category, detail in zip(
        rows.column("call_key").to_pylist(),
        rows.column("ok").to_pylist(),
        rows.column("error_category").to_pylist(),
        rows.column("detail").to_pylist(),
        strict=True,
    ):
        if not ok and category and detail:
            first.setdefault(owner[key], {}).setdefault(category, detail)
    return first


def _cut_keys(folder: RunFolder) -> set[str]:
    """The call keys of the run's replies cut by the token limit (their labels' notes)."""
    path = folder.table("labels")
    if not path.is_file():
        return set()
    labels = pq.read_table(path, columns=["call_key", "note"]).to_pylist()
    return {r["call_key"] for r in labels if (r["note"] or "").startswith(TRUNCATED_NOTE)}


def _limits(judges: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int | None, float]]:
    """Per (judge, config): the token limit its calls were sent with and their timeout, from
    run.json."""
    limits: dict[tuple[str, str], tuple[int | None, float]] = {}
    for dump in judges:
        try:
            spec = JudgeSpec.model_validate(dump)
        except ValueError:
            continue  # not a judge this version reads: nothing to name
        for config in spec.configs:
            tokens = spec.decoding(config).get("max_tokens")
            limits[(spec.name, config.name)] = (tokens, spec.request_timeout(config))
    return limits


def run_health(folder: RunFolder) -> list[ConfigHealth]:
    """Per judge config of the run (in the calls table's order): planned slots, valid
    outcomes, failed calls by category, pending calls, the first message, a breaker stop,
    the replies cut by the token limit with that limit, and the request timeout. A run
    judged only (no outcomes yet) counts its stored replies as valid."""
    calls = pq.read_table(
        folder.calls, columns=["judge", "config", "call_key", "status", "error_category"]
    ).to_pylist()
    stored = {(c["judge"], c["config"], c["call_key"]) for c in calls if c["status"] == "stored"}
    cut_keys = _cut_keys(folder)
    valid: Counter[tuple[str, str]] = Counter()
    unreadable: Counter[tuple[str, str]] = Counter()
    if folder.outcomes.is_file():
        columns = ["judge", "config", "outcome", "call_key"]
        for row in pq.read_table(folder.outcomes, columns=columns).to_pylist():
            jc = (row["judge"], row["config"])
            if row["outcome"] in VALID:
                valid[jc] += 1
            elif row["outcome"] == "M" and (*jc, row["call_key"]) in stored:
                unreadable[jc] += 1  # stored by the judge stage, yet remap found no reply
    else:  # judged only (`judgeline judge`): a stored reply is all the stage can tell
        for c in calls:
            valid[(c["judge"], c["config"])] += c["status"] == "stored"
    info = folder.find_info()
    trips = {
        (t["judge"], t["config"]): t
        for t in ((info.counts or {}).get("breaker_trips", []) if info else [])
    }
    limits = _limits(info.judges) if info else {}
    planned: Counter[tuple[str, str]] = Counter()
    pending: Counter[tuple[str, str]] = Counter()
    cut: Counter[tuple[str, str]] = Counter()
    failed: dict[tuple[str, str], Counter[str]] = {}
    failed_keys: dict[tuple[str, str], set[str]] = {}
    for c in calls:
        jc = (c["judge"], c["config"])
        planned[jc] += 1
        failed.setdefault(jc, Counter())
        if c["status"] == "failed":
            failed[jc][c["error_category"] or NOT_RECORDED] += 1
            failed_keys.setdefault(jc, set()).add(c["call_key"])
        elif c["status"] == "pending":
            pending[jc] += 1
        if c["call_key"] in cut_keys:
            cut[jc] += 1
    for jc, n in unreadable.items():
        failed.setdefault(jc, Counter())[UNREADABLE] += n
    messages = _first_messages(folder, failed_keys)
    health = []
    for jc, n in planned.items():
        trip = trips.get(jc)
        top = next((c for c, _ in failed[jc].most_common(1)), "")
        message = trip["message"] if trip else messages.get(jc, {}).get(top)
        health.append(
            ConfigHealth(
                judge=jc[0],
                config=jc[1],
                planned=n,
                valid=valid[jc],
                failed=dict(sorted(failed[jc].items())),
                pending=pending[jc],
                message=_one_line(message),
                stopped=trip,
                truncated=cut[jc],
                max_tokens=limits[jc][0] if jc in limits else None,
                timeout_s=limits[jc][1] if jc in limits else None,
            )
        )
    return health


def run_status(health: list[ConfigHealth]) -> RunStatus:
    """`failed` with no valid outcome at all, `degraded` if a config is `short`, else
    `completed`."""
    if not any(h.valid for h in health):
        return "failed"
    if any(short(h) for h in health):
        return "degraded"
    return "completed"


def _in_flight(trip: dict[str, Any]) -> str:
    """The requests already in flight when the breaker opened, and how they ended."""
    n, failed = int(trip.get("in_flight") or 0), int(trip.get("in_flight_failed") or 0)
    if n == 0:
        return ""
    if failed == n:
        return f"; {n} requests already in flight then failed too"
    return f"; {n} requests already in flight then answered ({failed} failed)"


def stop_line(run_id: str, trip: dict[str, Any], message: str | None, held: int) -> str:
    """A breaker stop as one sentence: after how many failures in a row of which category,
    the provider's first message, the requests already in flight, the calls held back and
    the command to send them later."""
    status = f" (HTTP {trip['http_status']})" if trip.get("http_status") else ""
    fix = FIX.get(trip["category"], "fixing the cause")
    return (
        f"stopped after {trip['failures']} {trip['category']} failures in a row{status}: "
        f"{_one_line(message) or 'no message'}{_in_flight(trip)}; {held} calls not sent, run "
        f"`judgeline rerun-failed {run_id}` after {fix}"
    )


def _cut(h: ConfigHealth) -> str:
    """The config's replies cut by the token limit, naming the limit (empty if none)."""
    if not h.truncated:
        return ""
    limit = f" (max_tokens {h.max_tokens})" if h.max_tokens is not None else ""
    return (
        f"; {h.truncated} replies cut by the token limit{limit}: raise the config's "
        "max_tokens and run again (a new limit makes new calls)"
    )


def _timeouts(h: ConfigHealth) -> str:
    """For a config with calls failed at their timeout: the timeout and what it cost."""
    if not h.failed.get("timeout"):
        return ""
    after = f" of {h.timeout_s:g} s" if h.timeout_s is not None else ""
    return (
        f"; the timeout{after} is retried once at most (a provider may bill a request the "
        "client gave up on): raise the judge's timeout_s if its replies take longer"
    )


def describe(run_id: str, health: list[ConfigHealth]) -> list[str]:
    """The reasons, one line per judge config that is `short`: its valid outcomes,
    failures by category, the provider's first message, replies cut by the token limit
    and what to run next."""
    lines = []
    for h in health:
        if not short(h):
            continue
        where = f"{h.judge} · {h.config}: {h.valid}/{h.planned} valid outcomes" + _cut(h)
        failures = ", ".join(f"{n} {c}" for c, n in h.failed.items())
        others = h.planned - h.valid - h.truncated - sum(h.failed.values())
        if h.stopped:
            lines.append(f"{where}; {stop_line(run_id, h.stopped, h.message, h.pending)}")
        elif set(h.failed) == {NOT_RECORDED}:
            lines.append(
                f"{where}; {failures}: the imported files hold no reply for them, so nothing "
                "can send them again; import files that have them"
            )
        elif failures:
            lines.append(
                f"{where}; failed: {failures}; first: {h.message or 'no message'}"
                f"{_timeouts(h)}; `judgeline rerun-failed {run_id}` sends them again"
            )
        elif others > 0:
            lines.append(f"{where}; the others are invalid, abstained or pending")
        else:
            lines.append(where)
    return lines


def reasons(run_id: str, status: RunStatus, health: list[ConfigHealth]) -> list[str]:
    """What a `degraded` or `failed` run leads with: its status, then the reasons per judge
    config (`describe`); nothing for a `completed` run."""
    if status == "completed":
        return []
    if status == "failed":
        lead = f"run {run_id} failed: no judge config produced a valid outcome"
    else:
        n = sum(1 for h in health if short(h))
        lead = (
            f"run {run_id} degraded: {n} of {len(health)} judge configs got no reply to more "
            f"than {MISSING_SHARE:.0%} of their calls, have fewer than {VALID_SHARE:.0%} valid "
            "outcomes, or were stopped"
        )
    return [lead, *describe(run_id, health)]


def raise_unless_completed(
    run_id: str,
    status: RunStatus,
    health: list[ConfigHealth],
    result: dict[str, Any] | None = None,
) -> None:
    """Raise `RunNotCompleted` (with the `reasons` and the job's `result`) for a `degraded`
    or `failed` run."""
    if status != "completed":
        raise RunNotCompleted(run_id, status, reasons(run_id, status, health), result)
