"""The report's disagreements section, and the page beside the report that holds the rest.

Per judge and config, the first `INLINE` unsettled (pair, seed) views (tasks/report/pairs.py)
open inline, one `<details>` each; the rest go to `PAGE`, a second self-contained page next
to `report.html`, so the report stays light however many conflicts a run has. Both pages
filter by dataset and disposition with a small inline script.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

from tasks.report.page import environment
from tasks.report.pairs import UNSETTLED, PairView
from tasks.storage import report_mode, write_text_atomic

__all__ = [
    "INLINE",
    "PAGE",
    "DisagreementsSection",
    "PairGroup",
    "disagreements_section",
    "render_pairs_page",
    "write_pairs_page",
]

INLINE = 20
"""Views per (judge, config) shown inside the report; the rest are on PAGE."""

PAGE = "disagreements.html"
"""The second page's file name, beside the report."""

_LABELS = {
    "order_conflict": "order conflict",
    "mixed": "mixed",
    "incomplete_M": "incomplete (no reply)",
    "incomplete_I": "incomplete (invalid)",
    "incomplete_X": "incomplete (abstained)",
}


@dataclass(frozen=True)
class PairGroup:
    """The unsettled views of one judge and config: counts, those shown here, how many not."""

    judge: str
    config: str
    counts: list[tuple[str, int]]
    views: list[PairView]
    elsewhere: int


@dataclass
class DisagreementsSection:
    """Data for `disagreements.html.j2` (the attributes every report section has, plus groups)."""

    sid: str = "disagreements"
    label: str = "Disagreements"
    title: str = "Reading the disagreements"
    missing: str = ""
    groups: list[PairGroup] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    dispositions: list[tuple[str, str]] = field(default_factory=list)
    page: str = ""
    """Link to the page holding the views not shown inline ("" when all are inline)."""


def _groups(views: list[PairView], inline: int | None) -> list[PairGroup]:
    groups = []
    for (judge, config), members in groupby(views, key=lambda v: (v.judge, v.config)):
        group = list(members)
        counts = Counter(v.disposition for v in group)
        shown = group if inline is None else group[:inline]
        rest = group[inline:] if inline is not None else []
        counts_list = [(_LABELS[d], counts[d]) for d in UNSETTLED if counts[d]]
        groups.append(PairGroup(judge, config, counts_list, shown, len(rest)))
    return groups


def _filters(views: list[PairView]) -> tuple[list[str], list[tuple[str, str]]]:
    present = {v.disposition for v in views}
    return sorted({v.dataset for v in views}), [(d, _LABELS[d]) for d in UNSETTLED if d in present]


def disagreements_section(views: list[PairView], inline: int = INLINE) -> DisagreementsSection:
    """The section for a run's unsettled views (sorted by judge and config, as pair_views
    returns them); `page` links to PAGE when some did not fit inline."""
    datasets, dispositions = _filters(views)
    groups = _groups(views, inline)
    return DisagreementsSection(
        missing="" if views else "order conflicts, mixed or incomplete pairs",
        groups=groups,
        datasets=datasets,
        dispositions=dispositions,
        page=PAGE if any(g.elsewhere for g in groups) else "",
    )


def render_pairs_page(views: list[PairView], title: str, inline: int = INLINE) -> str:
    """The second page: per judge and config, the views after the first `inline`."""
    rest = [
        v
        for _, members in groupby(views, key=lambda v: (v.judge, v.config))
        for v in list(members)[inline:]
    ]
    datasets, dispositions = _filters(rest)
    section = DisagreementsSection(
        title=title, groups=_groups(rest, None), datasets=datasets, dispositions=dispositions
    )
    return environment().get_template("pairs_page.html.j2").render(title=title, s=section)


def write_pairs_page(views: list[PairView], folder: Path, run_id: str) -> Path | None:
    """Write PAGE into `folder` when some views do not fit inline (else remove a stale one)."""
    path = folder / PAGE
    if not disagreements_section(views).page:
        path.unlink(missing_ok=True)
        return None
    html = render_pairs_page(views, f"judgeline disagreements {run_id} (beyond the first {INLINE})")
    write_text_atomic(html, path, overwrite=True, mode=report_mode())
    return path
