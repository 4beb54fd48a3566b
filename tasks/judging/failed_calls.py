"""A run's calls with no stored reply, grouped for a reader: per judge, config, status and
category, with what the provider said (from the attempts log, whole) and how many calls
each message stands for."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tasks.errors import InputError
from tasks.judging.cache import read_attempts, stored_keys
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

__all__ = ["FailureGroup", "failed_call_groups"]

_IDS = re.compile(r"[0-9A-Fa-f]{12,}|\b(?:req|msg|chatcmpl)[_-][0-9A-Za-z]+")
"""What makes two messages of the same failure differ: request ids and long hex runs."""
_TIME = re.compile(r"\b(\d+(?:\.\d+)?) ?(ms|s)\b")
"""And how long a call took (`ReadTimeout after 3007 ms`), which is no other cause."""
_TIME_MARK = "\x00"
_SECONDS = {"ms": 0.001, "s": 1.0}


def _time_range(found: list[re.Match[str]]) -> str:
    """`3001 to 3013 ms` for the times of one place in a message, shortest to longest."""
    ordered = sorted(found, key=lambda m: float(m.group(1)) * _SECONDS[m.group(2)])
    low, high = ordered[0], ordered[-1]
    if low.group(0) == high.group(0):
        return low.group(0)
    if low.group(2) == high.group(2):
        return f"{low.group(1)} to {high.group(1)} {low.group(2)}"
    return f"{low.group(0)} to {high.group(0)}"


@dataclass
class FailureGroup:
    """The failed (or pending) calls of one judge config with one category."""

    judge: str
    config: str
    status: str
    category: str
    calls: int = 0
    _counts: Counter[str] = field(default_factory=Counter, repr=False)
    _variants: dict[str, dict[str, None]] = field(default_factory=dict, repr=False)

    def add_message(self, message: str) -> None:
        general = _TIME.sub(_TIME_MARK, _IDS.sub("…", message))
        self._counts[general] += 1
        self._variants.setdefault(general, {})[message] = None

    @property
    def messages(self) -> Counter[str]:
        """The latest attempt's message of each call, counted. Messages that differ only in
        ids (request ids, hex runs) or in how long the call took count as one: the ids shown
        as `…` with how many there were (one call's request id never stands for others), the
        times as their range."""
        shown: Counter[str] = Counter()
        for general, count in self._counts.items():
            variants = list(self._variants[general])
            if len(variants) == 1:
                shown[variants[0]] = count
                continue
            times = [list(_TIME.finditer(_IDS.sub("…", v))) for v in variants]
            text = general
            for place in zip(*times, strict=True):
                text = text.replace(_TIME_MARK, _time_range(list(place)), 1)
            ids = list(dict.fromkeys(_TIME.sub(_TIME_MARK, v) for v in variants))
            if len(ids) > 1:
                first = _IDS.search(variants[0])
                example = f", the first {first.group(0)}" if first else ""
                text = f"{text} ({len(ids)} different ids{example})"
            shown[text] = count
        return shown


def failed_call_groups(work: WorkDir, run_id: str) -> list[FailureGroup]:
    """The run's planned calls with no stored reply now, grouped, largest group first.

    A pending call was never tried (a breaker held it, or the run stopped first); a failed
    call's message is its latest attempt's.
    """
    path = RunFolder(work, run_id).calls
    if not path.is_file():
        raise InputError(f"run {run_id!r} has no calls table: {path} does not exist")
    calls = pq.read_table(path, columns=["judge", "config", "call_key", "status", "error_category"])
    calls = calls.filter(pc.not_equal(calls.column("status"), "stored"))
    stored = stored_keys(work) if calls.num_rows else set()
    latest = _latest_messages(work, set(calls.column("call_key").to_pylist()) - stored)
    groups: dict[tuple[str, str, str, str], FailureGroup] = {}
    seen: set[tuple[str, str, str]] = set()
    for row in calls.to_pylist():
        key = row["call_key"]
        if key in stored or (row["judge"], row["config"], key) in seen:
            continue  # stored since (by a rerun or another run), or a repeat of a call
        seen.add((row["judge"], row["config"], key))
        status = row["status"]
        category = row["error_category"] or ("never sent" if status == "pending" else "unknown")
        at = (row["judge"], row["config"], status, category)
        group = groups.setdefault(at, FailureGroup(*at))
        group.calls += 1
        if key in latest:
            group.add_message(latest[key])
    return sorted(groups.values(), key=lambda g: (-g.calls, g.judge, g.config, g.category))


def _latest_messages(work: WorkDir, keys: set[str]) -> dict[str, str]:
    """The latest failed attempt's `HTTP nnn: detail` of each call key."""
    if not keys:
        return {}
    attempts = read_attempts(work)
    wanted = pa.array(sorted(keys), type=pa.string())
    attempts = attempts.filter(pc.is_in(attempts.column("call_key"), value_set=wanted))
    attempts = attempts.sort_by([("started_at", "ascending"), ("attempt", "ascending")])
    latest: dict[str, str] = {}
    for row in attempts.select(["call_key", "ok", "http_status", "detail"]).to_pylist():
        if not row["ok"]:
            detail = row["detail"] or "no message"
            if row["http_status"] is not None and not detail.startswith("HTTP "):
                detail = f"HTTP {row['http_status']}: {detail}"
            latest[row["call_key"]] = detail
    return latest
