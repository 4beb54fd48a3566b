"""The report's section "since the previous run of this configuration".

The previous run is the latest earlier completed, readable run of the same configuration
(`tasks.history.previous`). The section shows what `judgeline diff` shows (pairs
and judge configs added and removed, calls sent against reused, per judge config the score
change with its paired interval, consistency, position-bias share and valid share), the money
this run and its drift probe spent where the judge is priced (`tasks.judging.spend`), each
flipped pair readable in place (question, answers and this run's replies: the views of
`tasks.report.pairs`), the probe's comparison with the previous probe, and the alarms.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schemas.config import AlarmSpec
from schemas.cost import SpendRow
from schemas.run import RunRecord
from tasks.errors import InputError
from tasks.hashing import sha256_text
from tasks.history.alarms import alarm_text, check_alarms
from tasks.history.diff import Flip, RunDiff, diff_views
from tasks.history.previous import comparable, previous_view
from tasks.history.view import RunView, read_run_view
from tasks.report.pairs import PairView, pair_views
from tasks.runs.folder import RunFolder
from tasks.runs.record import read_record
from tasks.store.workdir import WorkDir

__all__ = ["FLIPS_SHOWN", "FlipView", "SinceSection", "since_section"]

FLIPS_SHOWN = 20
"""Flipped pairs that open in the report (`judgeline diff A B --json` lists all)."""


@dataclass(frozen=True)
class FlipView:
    """One flipped pair of one judge config: the flip, and this run's views of it by seed."""

    flip: Flip
    views: list[PairView]

    @property
    def anchor(self) -> str:
        f = self.flip
        return "flip-" + sha256_text(f"{f.judge}|{f.config}|{f.dataset}|{f.pair_id}")[:12]


@dataclass
class SinceSection:
    """Data for `since.html.j2` (the attributes every report section has, plus its parts)."""

    sid: str = "since"
    label: str = "Since last run"
    title: str = "Since the previous run of this configuration"
    missing: str = ""
    previous: str | None = None
    lines: list[str] = field(default_factory=list)
    """The pairs, judge configs and calls, one sentence each."""
    rows: list[dict[str, str]] = field(default_factory=list)
    """Per judge config in both runs: its figures before and after, formatted."""
    money: list[dict[str, str]] = field(default_factory=list)
    flips: list[FlipView] = field(default_factory=list)
    more_flips: int = 0
    probe: list[str] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1%}"


def _signed(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:+.3f}"


def _score(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f}"


def _rows(diff: RunDiff) -> list[dict[str, str]]:
    flips = Counter((f.judge, f.config) for f in diff.flips)
    rows = []
    for c in diff.changes:
        scored = not (math.isnan(c.score_before) or math.isnan(c.score_after))
        rows.append(
            {
                "config": f"{c.judge} · {c.config}",
                "pairs": str(c.shared_pairs),
                "score": f"{_score(c.score_before)} → {_score(c.score_after)}"
                if scored
                else "– (not replayed)",
                "change": f"{_signed(c.score_change)} "
                f"({_signed(c.change_low)} to {_signed(c.change_high)})",
                "consistency": f"{_pct(c.before['consistency'])} → {_pct(c.after['consistency'])}",
                "left": f"{_pct(c.before['left_share'])} → {_pct(c.after['left_share'])}",
                "valid": f"{_pct(c.before['valid_share'])} → {_pct(c.after['valid_share'])}",
                "flips": str(flips[(c.judge, c.config)]),
            }
        )
    return rows


def _lines(diff: RunDiff) -> list[str]:
    lines = [
        f"pairs: {diff.pairs_shared} shared, {diff.pairs_added} added, {diff.pairs_removed} removed"
    ]
    for label, configs in (("added", diff.configs_added), ("removed", diff.configs_removed)):
        if configs:
            lines.append(f"judge configs {label}: " + ", ".join(f"{j} · {c}" for j, c in configs))
    for label, calls in (("the previous run", diff.calls_a), ("this run", diff.calls_b)):
        lines.append(
            f"calls of {label}: {calls.get('sent', 0)} sent, "
            f"{calls.get('cached', 0)} reused from the cache"
        )
    return lines


def _money(
    work: WorkDir, run_ids: list[tuple[str, str]], known: dict[str, list[SpendRow]]
) -> list[dict[str, str]]:
    """Per judge config of each run that has calls: sent, reused and USD where priced
    (`known`: a run's `run_spend` rows the caller has, else read)."""
    from tasks.judging.spend import run_spend

    rows = []
    for label, run_id in run_ids:
        if not RunFolder(work, run_id).calls.is_file():
            continue
        for r in known[run_id] if run_id in known else run_spend(work, run_id):
            rows.append(
                {
                    "run": label,
                    "config": f"{r.judge} · {r.config}",
                    "sent": str(r.sent_calls),
                    "cached": str(r.cached_calls),
                    "usd": "not priced" if r.usd is None else f"${r.usd:.4f}",
                }
            )
    return rows


def _flip_views(work: WorkDir, run_id: str, flips: list[Flip]) -> list[FlipView]:
    """Each flip with this run's views of its pair (all seeds) for its judge config."""
    by_pair: dict[str, list[PairView]] = {}
    out = []
    for flip in flips:
        if flip.pair_id not in by_pair:
            try:
                by_pair[flip.pair_id] = pair_views(work, run_id, flip.pair_id)
            except InputError:
                by_pair[flip.pair_id] = []
        views = [
            v
            for v in by_pair[flip.pair_id]
            if (v.judge, v.config, v.dataset) == (flip.judge, flip.config, flip.dataset)
        ]
        out.append(FlipView(flip, sorted(views, key=lambda v: v.seed)))
    return out


def _probe_lines(probe: dict[str, Any] | None) -> list[str]:
    if not probe:
        return []
    calls = probe.get("calls") or {}
    lines = [
        f"probe run {probe.get('run_id')} on {probe.get('date')}: {probe.get('pairs')} pairs, "
        f"{calls.get('sent', 0)} calls sent, {calls.get('cached', 0)} reused, "
        f"{calls.get('failed', 0)} failed"
    ]
    if "agreement" not in probe:
        return [*lines, "no earlier probe of this benchmark to compare with"]
    lines.append(f"compared slot by slot with probe {probe.get('previous')}:")
    for name, a in (probe.get("agreement") or {}).items():
        lines.append(
            f"{name}: agreement {a['agreement']:.1%} (95% {a['low']:.1%} to {a['high']:.1%}) "
            f"over {a['slots']} slots"
        )
    shifts = ", ".join(f"{k}: {n}" for k, n in (probe.get("shifts") or {}).items())
    lines.append(
        f"{probe.get('shifted')} of {probe.get('cells')} (pair, seed) changed disposition"
        + (f" ({shifts})" if shifts else "")
    )
    return lines


def _alarms(record: RunRecord, view: RunView, diff: RunDiff | None) -> list[dict[str, Any]]:
    """The alarms the run recorded; while it is still running, those its thresholds raise
    against the previous run so far (the run's status is checked by the flow itself)."""
    if record.alarms:
        return list(record.alarms)
    # Only a run configuration has thresholds (a judge, live or imported run's record does not).
    spec = record.config.get("alarms")
    if not isinstance(spec, dict):
        return []
    checked = record.model_copy(update={"status": "completed"})
    return check_alarms(AlarmSpec.model_validate(spec), checked, view, diff, record.probe)


def since_section(
    work: WorkDir, run_id: str, *, spend: list[SpendRow] | None = None
) -> SinceSection:
    """The section for `run_id` (it says so when there is no previous run to compare);
    `spend`: the run's `run_spend` rows, when the caller has read them."""
    record = read_record(work, run_id)
    out = SinceSection(probe=_probe_lines(record.probe))
    view = read_run_view(work, run_id) if comparable(work, record) else None
    before = None if view is None else previous_view(work, record)
    diff = None
    if view is not None and before is not None:
        diff = diff_views(before, view)
        out.previous = before.record.run_id
        out.lines, out.rows = _lines(diff), _rows(diff)
        out.flips = _flip_views(work, run_id, diff.flips[:FLIPS_SHOWN])
        out.more_flips = max(0, len(diff.flips) - FLIPS_SHOWN)
    runs = [("this run", run_id)]
    if (record.probe or {}).get("run_id"):
        runs.append(("drift probe", str((record.probe or {})["run_id"])))
    out.money = _money(work, runs, {} if spend is None else {run_id: spend})
    if view is not None:
        out.alarms = [alarm_text(a) for a in _alarms(record, view, diff)]
    return out
