"""The judge stage's tally: counts of sent, stored, failed and skipped calls, the judge
configs its breakers stopped, and the optional rich progress bar that shows them (calls
done / cached / failed, rate, ETA)."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tasks.judging.pacing import BreakerTrip

__all__ = ["Tally"]


WIDE = 100
"""Terminal columns from which the bar also shows the time elapsed."""


def _columns(width: int) -> list[ProgressColumn]:
    """The bar's columns: every number whole at 80 columns (the bar itself shrinks first);
    wider terminals also get the time elapsed."""
    return [
        TextColumn("[bold]judge calls" if width >= WIDE else "[bold]calls"),
        BarColumn(bar_width=None if width >= WIDE else 12),
        MofNCompleteColumn(),
        TextColumn("cached {task.fields[cached]}  failed {task.fields[failed]}"),
        TextColumn("{task.fields[rate]}"),
        *([TimeElapsedColumn()] if width >= WIDE else []),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]


class _Bar(Progress):
    """A rich progress bar that takes its numbers from `sync` each time it is drawn (four
    times a second, on rich's thread) instead of at every call: updating rich's task per
    call (its lock, its speed samples) cost the stage's event loop more than the bar shows."""

    def __init__(self, *columns: ProgressColumn, sync: Callable[[], None], **kwargs: Any):
        self._sync = sync  # first: rich draws once while it is made
        super().__init__(*columns, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        self._sync()
        yield from super().get_renderables()


class Tally:
    """Counts and the optional progress bar (on stderr) of one judge stage."""

    def __init__(self, total: int, cached: int, show: bool, console: Console | None = None) -> None:
        self.sent = 0
        self.stored = 0
        self.failed: Counter[str] = Counter()
        self.skipped = 0
        self.cached = cached
        self.trips: dict[tuple[str, str], BreakerTrip] = {}
        self.timed_out = 0
        """Requests abandoned at their timeout (a provider may still bill each)."""
        self.lost = 0
        """Replies received that could not be kept (no room even in a journal's reserve)."""
        self.published: set[str] = set()
        """Call keys other processes (Dask workers) said they published: a stage stopped
        with the store away cannot list them."""
        self.at_provider: dict[str, list[str]] = {}
        """Provider batches left to fetch by the resume (a stage stopped before storing
        their results): the batch's id and the stage's calls in it."""
        self.unjournaled: list[str] = []
        """Ids of provider batches accepted whose journal entry could not be written."""
        self.started = time.monotonic()
        self._failures = 0
        """The sum of `failed`, kept apart: the bar reads it on rich's thread, where summing
        a Counter the event loop may be adding a category to could fail."""
        self._last_sent = self.started
        """When the latest call was counted (the bar's rate is the rate up to then)."""
        self._progress: Progress | None = None
        self._task: Any = None
        if show:
            console = console or Console(stderr=True)
            self._progress = _Bar(
                *_columns(console.width), sync=self._show, console=console, refresh_per_second=4
            )
            self._task = self._progress.add_task(
                "calls", total=total, completed=cached, cached=cached, failed=0, rate=""
            )
            self._progress.start()

    def record(self, ok: bool, category: str | None) -> None:
        """One call sent: its reply stored (`ok`), or failed with `category`."""
        self.sent += 1
        if ok:
            self.stored += 1
        else:
            self.failed[category or "unknown"] += 1
            self._failures += 1
        self._last_sent = time.monotonic()

    def _show(self) -> None:
        """Bring the bar's task up to the counts (called by the bar as it draws)."""
        if self._progress is None or self._task is None:
            return  # drawn while it is being made: nothing counted yet
        fields: dict[str, Any] = {"cached": self.cached + self.skipped, "failed": self._failures}
        if self.sent:
            rate = self.sent / max(self._last_sent - self.started, 1e-9)
            fields["rate"] = f"{rate:,.0f}/s"
        done = self.cached + self.skipped + self.sent
        self._progress.update(self._task, completed=done, **fields)

    def record_batch(self, counts: Mapping[str, int]) -> None:
        """Count a whole batch's outcomes at once (a batch that ran in another process):
        `stored`, `skipped`, `held` (not sent: a breaker is open) and `failed_<category>`."""
        for outcome, n in counts.items():
            if outcome == "held":
                continue
            category = None if outcome == "stored" else outcome.removeprefix("failed_")
            for _ in range(n):
                if outcome == "skipped":
                    self.skip()
                else:
                    self.record(outcome == "stored", category)

    def add_trips(self, trips: Iterable[BreakerTrip]) -> None:
        """Judge configs stopped by a breaker. Several clients (one per Dask batch) may stop
        the same config: the first trip stays (its failures in a row, its message), the
        others' requests count as in flight (sent before their own breaker opened) and
        their held calls add up."""
        for trip in trips:
            key = (trip.judge, trip.config)
            seen = self.trips.get(key)
            self.trips[key] = (
                trip
                if seen is None
                else dataclasses.replace(
                    seen,
                    held=seen.held + trip.held,
                    in_flight=seen.in_flight + trip.failures + trip.in_flight,
                    in_flight_failed=seen.in_flight_failed + trip.failures + trip.in_flight_failed,
                )
            )

    def skip(self) -> None:
        """A call not sent after all: another run stored its reply while it waited (the bar
        counts it as cached: it came from the cache, paid by the other run)."""
        self.skipped += 1

    def close(self) -> None:
        """Stop the progress bar, if there is one."""
        if self._progress is not None:
            self._progress.stop()
