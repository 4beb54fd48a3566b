"""Stopping the judge stage on SIGINT, SIGTERM or a full disk without paying for a call twice.

While the stage sends, the first SIGINT (Ctrl-C) or SIGTERM stops it cleanly: no new call
starts (calls not started stay pending, with no attempt recorded), the requests in flight
may finish for up to `grace_s` seconds and their replies are stored like any other, then
the stage writes the run's tables and raises `tasks.errors.Interrupted`. Requests still in
flight at the deadline are abandoned (sent again on resume). A second signal exits at once; replies
already received are in the journal, which the next run publishes.

A full file system stops the stage the same way (`StopRequest.disk_full`, told by the
cache writer at its first write refused for want of space); the stage then raises
`tasks.errors.DiskFull`, without writing the run's tables: there is no room for them. So
does an object store that left a request unanswered for its whole patience (a
`tasks.errors.StoreUnreachable`, told by the cache writer or a call's claim): the stage
raises `tasks.errors.StoreDown`, the replies waiting in this machine's journal. The stage's
other senders (provider batches, Dask) are handed the same `StopRequest` and tell it the
same way; a Dask worker holds one of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Iterator
from types import FrameType
from typing import TypeVar

from tasks.errors import stop_cause

__all__ = ["GRACE_S", "STOP_SIGNALS", "StopRequest", "StopSignal", "raise_on_stop_signals",
           "stop_on_signals"]  # fmt: skip

GRACE_S = 10.0
"""Longest wait for the replies in flight after a stop signal (a judge's own timeout, if
shorter, ends them sooner)."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

T = TypeVar("T")


class StopRequest:
    """Whether the stage was asked to stop, and the calls in flight it waits for.

    `request(signum)` (the signal handler) stops new calls at once and abandons the calls
    still in flight `grace_s` later; a second request exits the process at once.
    """

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self.signum: int | None = None
        self.full: Exception | None = None
        """The write refused for want of space (an OSError), or the store's unanswered
        request (a StoreUnreachable), that stopped the stage (`disk_full`)."""
        self.cut_off = False
        self._inflight: set[asyncio.Task[object]] = set()
        """The tasks awaiting a request (or a retry's pause) in `guard`."""
        self._abandoned: set[asyncio.Task[object]] = set()
        """Those `_abandon` cancelled, whose cancel `guard` takes back."""
        self._stopping: asyncio.Event | None = None
        """Set once a stop is requested, for `pause`."""

    @property
    def requested(self) -> bool:
        return self.signum is not None or self.full is not None

    def disk_full(self, exc: Exception) -> None:
        """The work dir's file system is full, or its object store stopped answering: stop
        as on a signal (the replies in flight go to the journal, on a full disk into its
        reserve), silently: the stage's error says it once."""
        if self.requested:
            self.full = self.full or exc
            return
        self.full = exc
        self._stopped()

    def request(self, signum: int) -> None:
        """Stop starting calls; abandon those in flight after the grace period."""
        if self.signum is not None:
            sys.stderr.write(f"{signal.Signals(signum).name} again: exiting at once\n")
            os._exit(128 + signum)
        self.signum = signum
        waiting = (
            f"no new judge calls; waiting up to {self.grace_s:g} s for the "
            f"{len(self._inflight)} in flight and storing their replies"
        )
        if stop_cause(signum) is None:  # a signal from outside: the user may stop sooner
            waiting = (
                f"{signal.Signals(signum).name}: {waiting} (press Ctrl-C again to quit at once)"
            )
        sys.stderr.write(waiting + "\n")
        self._stopped()

    def _stopped(self) -> None:
        asyncio.get_running_loop().call_later(self.grace_s, self._abandon)
        if self._stopping is not None:
            self._stopping.set()

    async def pause(self, seconds: float) -> bool:
        """Sleep `seconds`, or less if a stop is requested meanwhile; True if it was."""
        if not self.requested:
            if self._stopping is None:
                self._stopping = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)
        return self.requested

    def _abandon(self) -> None:
        self.cut_off = True
        for task in list(self._inflight):
            self._abandoned.add(task)
            task.cancel()

    async def guard(self, awaitable: Awaitable[T]) -> T | None:
        """Await a request in flight; None if it was abandoned at the deadline.

        What `_abandon` cancels is the task awaiting here (a task of its own per request cost
        the event loop a task and its callbacks per call); its cancel is taken back
        (`Task.uncancel`), so a cancel from anywhere else still ends that task."""
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        try:
            return await awaitable
        except asyncio.CancelledError:
            if task in self._abandoned:
                self._abandoned.discard(task)
                if task.uncancel() == 0:
                    return None
            raise
        finally:
            self._inflight.discard(task)
            if task in self._abandoned:  # the request ended without taking the cancel
                self._abandoned.discard(task)
                task.uncancel()


@contextlib.contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[StopRequest]:
    """Route SIGINT and SIGTERM to `stop.request` in the running event loop, and restore the
    previous handlers after. Outside the main thread signals cannot be caught: a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.request, sig)
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)


class StopSignal(BaseException):
    """SIGTERM outside the judge stage, raised where the main thread is (as KeyboardInterrupt
    is for SIGINT); `tasks.runs.jobs.recorded_run` records the run `interrupted`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal = signum


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise StopSignal(signum)


def raise_on_stop_signals() -> None:
    """SIGINT and SIGTERM raise in the main thread at once, wherever it is.

    Without this, `asyncio.run` turns Ctrl-C into a cancellation that waits for the next
    await (a stage running synchronously ran to its end first) and SIGTERM kills the process
    with its record still `running`. The judge stage routes both to its own clean stop
    (`StopRequest`) while it sends."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_stop)
