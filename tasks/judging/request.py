"""What one judge stage is asked to do: the run, its plan, judges, template and batching."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.prompts.templates import DEFAULT_TEMPLATE, get_template
from tasks.store.workdir import WorkDir

if TYPE_CHECKING:
    from tasks.judging.planned import PlannedCall
    from tasks.judging.stopping import StopRequest
    from tasks.judging.tally import Tally

__all__ = ["JudgeRequest", "RemoteSender", "StageHooks"]


@dataclass(frozen=True)
class JudgeRequest:
    """One judge stage: send the run's uncached planned calls of `plan_id` to `judges`.

    `only_keys` restricts the stage to those call keys (a rerun of failed calls, a wave of a
    live run); `dask_address` (or $JUDGELINE_DASK_ADDRESS) sends the batches to a Dask
    scheduler instead of this process's event loop.
    """

    work: WorkDir
    run_id: str
    plan_id: str
    judges: tuple[JudgeSpec, ...]
    template_id: str = DEFAULT_TEMPLATE
    batch_size: int = 500
    only_keys: frozenset[str] | None = None
    dask_address: str | None = None
    scope: str | None = None
    """A cache scope for every call key (a drift probe's date): calls asked in another scope
    are new calls. Not supported on Dask."""

    def check(self) -> None:
        """Refuse a request that cannot run, before anything is read or written."""
        from tasks.runs.folder import check_run_id

        check_run_id(self.run_id)
        if self.batch_size < 1:
            raise InputError(f"batch size must be at least 1, not {self.batch_size}")
        if not self.judges:
            raise InputError("no judges given")
        names = [j.name for j in self.judges]
        if len(set(names)) != len(names):
            raise InputError(f"judge names must be unique, got {names}")
        get_template(self.template_id)
        from tasks.prompts.preflight import check_judges

        check_judges(self.judges)


RemoteSender = Callable[
    ["JudgeRequest", list["PlannedCall"], "Tally", "StopRequest"], Awaitable[list[Any]]
]
"""Sends a request's calls somewhere else (a Dask cluster, provider batches) with the run's
tally; returns each batch's counts. It keeps every reply it received before anything else,
or tells the stop (`StopRequest.disk_full`) that it cannot and ends at once."""


@dataclass(frozen=True)
class StageHooks:
    """What orchestration hands the judge stage: how one batch runs (a Prefect task in a
    flow, a plain coroutine in a test) and where batches go when not in this process.

    `run_batch(batch, session)` sends one `tasks.judging.batches.Batch`; `sender(request)`
    returns a `RemoteSender` for the request, or None to send in this event loop.
    """

    run_batch: Callable[..., Awaitable[dict[str, int]]] | None = None
    sender: Callable[[JudgeRequest], RemoteSender | None] | None = None
