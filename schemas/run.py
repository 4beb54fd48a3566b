"""One run's metadata: its record (what went in, which code ran, when, what came out) and
its run.json (the plan, template and judges of its calls, and the judge-stage counts)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RunStatus = Literal["running", "completed", "degraded", "failed", "interrupted"]
"""`degraded`: a judge config fell short of its valid outcomes or a breaker stopped it;
`failed`: a stage raised, or no judge config produced a single valid outcome;
`interrupted`: stopped by SIGINT or SIGTERM before it ended, everything received kept
(`judgeline rerun-failed RUN` takes it up again) (docs/design.md#run-status)."""


class CodeVersion(BaseModel):
    """The code that ran: git commit and whether the tree had uncommitted changes."""

    model_config = ConfigDict(extra="forbid")

    commit: str | None = Field(description="git commit of the project, None outside git.")
    dirty: bool | None = Field(description="Uncommitted changes in the tree at run time.")
    packages: dict[str, str] = Field(description="Versions of the packages that decide results.")


class ConfigHealth(BaseModel):
    """One judge config of a run: how many of its planned slots got a valid outcome, and
    why the others did not."""

    model_config = ConfigDict(extra="forbid")

    judge: str
    config: str
    planned: int = Field(description="Planned slots (calls) of the config in the run.")
    valid: int = Field(description="Slots whose outcome is `A`, `B` or `T`.")
    failed: dict[str, int] = Field(
        default_factory=dict, description="Failed calls by error category (latest attempt)."
    )
    pending: int = Field(default=0, description="Calls never sent (e.g. held by a breaker).")
    message: str | None = Field(
        default=None,
        description="The provider's first message for the config's most frequent failure "
        "(cut to one line; the attempts log keeps it whole).",
    )
    stopped: dict[str, Any] | None = Field(
        default=None, description="The breaker trip that stopped the config (`BreakerTrip`)."
    )
    truncated: int = Field(
        default=0, description="Replies cut by the token limit (parsed Invalid, noted so)."
    )
    max_tokens: int | None = Field(
        default=None, description="The config's token limit as the run's judges set it."
    )
    timeout_s: float | None = Field(
        default=None, description="The config's request timeout (seconds) in this run."
    )

    @property
    def share(self) -> float:
        """Valid outcomes per planned slot (1.0 for a config with no slot)."""
        return self.valid / self.planned if self.planned else 1.0


class RunRecord(BaseModel):
    """`runs/<run_id>/record.json`: one per pipeline run (nightly, demo or rerun)."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(default=1, description="Format version of this record.")
    run_id: str
    name: str = Field(description="Benchmark name from the run configuration.")
    status: RunStatus
    config_hash: str
    config: dict[str, object] = Field(description="The run configuration (holds no keys).")
    manifest_hash: str | None = None
    plan_id: str | None = None
    code: CodeVersion
    started_at: dt.datetime
    ended_at: dt.datetime | None = None
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    calls: dict[str, object] = Field(default_factory=dict, description="Judge-stage counts.")
    outcomes: dict[str, int] = Field(default_factory=dict, description="Count per outcome code.")
    live: dict[str, object] | None = Field(default=None, description="Live-stopping results.")
    imported: dict[str, object] | None = Field(
        default=None,
        description="For a run imported from another tool's judgment files: the tool, the "
        "files (path, SHA-256), the order convention and the parser's agreement with them.",
    )
    report: str | None = Field(default=None, description="Path of the HTML report.")
    error: str | None = Field(default=None, description="Why the run failed, if it did.")
    probe: dict[str, object] | None = Field(
        default=None, description="The drift probe: its run, date and comparison."
    )
    alarms: list[dict[str, object]] | None = Field(
        default=None, description="Thresholds this run crossed (each also a Prefect event)."
    )
    health: list[ConfigHealth] = Field(
        default_factory=list, description="Per judge config: valid outcomes and failures."
    )


class RunInfo(BaseModel):
    """`runs/<run_id>/run.json`: what the run's calls were made from, and their counts.

    Written by the judge stage (every field but `live`), extended by a live run with `live`.
    Fields absent from a file stay absent when it is written back (`dump`), so the bytes of
    older run folders round-trip; unknown fields are kept as they are.
    """

    model_config = ConfigDict(extra="allow")

    run_id: str | None = None
    plan_id: str
    manifest_hash: str
    template_id: str | None = None
    template_hash: str | None = None
    judges: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The judge specs (names of key sources only, never a key) as JSON.",
    )
    updated_at: str | None = Field(default=None, description="ISO time of the last write.")
    counts: dict[str, Any] | None = Field(default=None, description="Judge-stage counts.")
    live: dict[str, Any] | None = Field(
        default=None, description="Live-stopping figures; present only for a live run."
    )

    def dump(self) -> dict[str, Any]:
        """The JSON object on disk: the fields that were given or set, nothing else."""
        return self.model_dump(mode="json", exclude_unset=True)
