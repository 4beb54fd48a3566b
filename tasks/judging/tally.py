"""The judge stage's tally: counts of sent, stored, failed and skipped calls, the judge
configs its breakers stopped, and the optional rich progress bar that shows them (calls
done / cached / failed, rate, ETA)."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tasks.judging.pacing import BreakerTrip

__all__ = ["Tally"]


class Tally:
    """Counts and the optional progress bar (on stderr) of one judge stage."""

    def __init__(self, total: int, cached: int, show: bool) -> None:
        self.sent = 0
        self.stored = 0
        self.failed: Counter[str] = Counter()
        self.skipped = 0
        self.trips: dict[tuple[str, str], BreakerTrip] = {}
        self.timed_out = 0
        """Requests abandoned at their timeout (a provider may still bill each)."""
        self.started = time.monotonic()
        self._progress: Progress | None = None
        self._task: Any = None
        if show:
            self._progress = Progress(
                TextColumn("[bold]judge calls"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("cached {task.fields[cached]}  failed {task.fields[failed]}"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                refresh_per_second=4,
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
        if self._progress is not None:
            rate = self.sent / max(time.monotonic() - self.started, 1e-9)
            self._progress.update(
                self._task, advance=1, failed=sum(self.failed.values()), rate=f"{rate:,.0f} calls/s"
            )

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
        """A call not sent after all: another run stored its reply while it waited."""
        self.skipped += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1)

    def close(self) -> None:
        """Stop the progress bar, if there is one."""
        if self._progress is not None:
            self._progress.stop()
