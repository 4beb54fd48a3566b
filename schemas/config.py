"""The run configuration: one YAML file that says what a (nightly) run judges and how."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.judge import JudgeSpec
from schemas.vocabulary import CORE_POLICIES, DESIGNS, MAX_K, Design, Policy

LoaderKind = Literal["judgebench", "rmbench", "table", "demo", "answers"]


class DatasetSpec(BaseModel):
    """One input of the manifest: a loader and the file it reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: LoaderKind = Field(description="Loader: judgebench, rmbench, table, demo or answers.")
    path: str | None = Field(default=None, description="Input file (not for `demo`).")
    mapping: str | None = Field(
        default=None, description="Column mapping for `table`, e.g. `question=q,answer_a=x,...`."
    )
    dataset: str | None = Field(default=None, description="Dataset name; derived if omitted.")
    baseline: str | None = Field(
        default=None, description="`answers`: the system every other one is paired with."
    )
    pairs: Literal["baseline", "round-robin"] | None = Field(
        default=None, description="`answers`: pair each system with the baseline (default) or "
        "every two systems.",
    )  # fmt: skip

    @model_validator(mode="after")
    def _check(self) -> DatasetSpec:
        if self.kind != "demo" and not self.path:
            raise ValueError(f"a {self.kind} dataset needs a path")
        if self.kind == "table" and not self.mapping:
            raise ValueError("a table dataset needs a column mapping")
        if self.kind == "answers" and not self.baseline:
            raise ValueError("an answers dataset needs a baseline (the system's name)")
        if self.kind != "answers" and (self.baseline or self.pairs):
            raise ValueError("baseline and pairs only apply to an answers dataset")
        return self


class ScheduleSpec(BaseModel):
    """When the nightly deployment runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str = Field(default="0 2 * * *", description="Cron expression (default 02:00).")
    timezone: str = Field(default="UTC", description="IANA time zone of the cron expression.")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class LiveSpec(BaseModel):
    """Run a stopping policy live (waves of calls) instead of judging the full grid.

    The draws (reference, matching, couple order) come from `rng_seed` and are recorded in
    `runs/<run_id>/live_draws.parquet`; the same seed gives the same draws.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Literal["paired_unanimity", "advised"] = Field(
        default="paired_unanimity",
        description="The stopping policy executed live; `advised` follows the advice for the "
        "run `advised_by` at `max_change` (accepted when it advises paired_unanimity or "
        "paired_strict).",
    )
    # Left out of dumps when unset, so live configurations without them keep their hash.
    advised_by: str | None = Field(
        default=None,
        min_length=1,
        exclude_if=lambda v: v is None,
        description="`advised`: the full-grid run whose outcomes the advice is drawn from.",
    )
    max_change: float | None = Field(
        default=None,
        ge=0,
        le=1,
        exclude_if=lambda v: v is None,
        description="`advised`: the budget on changed decisions the advice is certified "
        "within (0.01 or '1%'), as `judgeline advise --max-change`.",
    )
    level: float | None = Field(
        default=None,
        ge=0.5,
        lt=1,
        exclude_if=lambda v: v is None,
        description="`advised`: the confidence of the certificates (default 0.95 or '95%'), "
        "as `judgeline advise --level`.",
    )
    rng_seed: int = Field(ge=0, description="Seed of the recorded draws.")

    @field_validator("max_change", "level", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().endswith("%"):
            try:
                return float(value.strip()[:-1]) / 100.0
            except ValueError:
                return value  # refused as not a number, with the field's name
        return value

    @model_validator(mode="after")
    def _advice_named(self) -> LiveSpec:
        if (self.policy == "advised") != (self.advised_by is not None):
            raise ValueError("policy: advised needs advised_by: RUN_ID, and only it does")
        if self.policy == "advised" and self.max_change is None:
            raise ValueError(
                "policy: advised needs max_change, the budget its advice is certified within "
                "(e.g. max_change: 1%)"
            )
        if self.policy != "advised" and (self.max_change is not None or self.level is not None):
            raise ValueError("max_change and level only apply to policy: advised")
        return self


class ProbeSpec(BaseModel):
    """A drift probe: a fixed, seeded sample of pairs judged again on every run with fresh
    calls (their cache scope holds the run's UTC date, so they are cached within the night and
    never reused on another), compared with the previous run's probe."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pairs: int = Field(default=20, ge=1, description="Pairs in the sample.")
    rng_seed: int = Field(default=0, ge=0, description="Seed of the sample (fixed across runs).")
    judges: list[str] | None = Field(
        default=None, min_length=1, description="Judges to probe (all when left out)."
    )


class AlarmSpec(BaseModel):
    """Thresholds checked at the end of each run against the previous run of the same
    configuration (docs/design.md#since-the-previous-run); a crossed one emits the Prefect
    event `judgeline.alarm` (see deployments/)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    consistency_drop: float | None = Field(
        default=0.05, gt=0, le=1, description="Alarm when consistency falls by more than this."
    )
    position_bias_rise: float | None = Field(
        default=0.10, gt=0, le=1, description="Alarm when the left share of conflicts rises more."
    )
    valid_share_below: float | None = Field(
        default=0.9, gt=0, le=1, description="Alarm when a judge config's valid share is lower."
    )
    probe_agreement_below: float | None = Field(
        default=0.8, gt=0, le=1, description="Alarm when probe agreement with last run is lower."
    )


class RunConfig(BaseModel):
    """Everything a run needs except credentials (those stay in the environment or Prefect)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="nightly", min_length=1, description="Name of this benchmark.")
    datasets: list[DatasetSpec] = Field(min_length=1)
    judges: list[JudgeSpec] = Field(min_length=1)
    template: str = Field(default="arena-hard-v1", description="Prompt template id.")
    k: int = Field(
        default=4, ge=2, le=MAX_K, description="Seeds per pair (even, 2-16); 2K calls per pair."
    )
    designs: list[Design] = Field(
        default_factory=lambda: list(DESIGNS),
        min_length=1,
        description="Reference designs to replay; leave the field out for all of them.",
    )
    policies: list[Policy] = Field(
        default_factory=lambda: list(CORE_POLICIES),
        min_length=1,
        description="Stopping policies to replay; leave the field out for the core four "
        "(full, nonstrict, strict, paired_unanimity).",
    )
    batch_size: int = Field(default=500, ge=1, description="Calls per judge task.")
    schedule: ScheduleSpec = Field(default_factory=ScheduleSpec)
    work_dir: str | None = Field(default=None, description="Work directory (default ./work).")
    # Left out of dumps when unset, so configurations without it keep their config hash.
    live: LiveSpec | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Execute a stopping policy live instead of the full grid.",
    )
    probe: ProbeSpec | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Re-judge a fixed sample of pairs with fresh calls every run (drift).",
    )
    alarms: AlarmSpec | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Thresholds that raise a Prefect event when crossed.",
    )
    dask_address: str | None = Field(
        default=None,
        min_length=1,
        exclude_if=lambda v: v is None,
        description="Dask scheduler that runs the full grid's judge batches, e.g. "
        "`tcp://10.0.0.5:8786`; unset: in the flow's process.",
    )

    @field_validator("k")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError(f"K must be even, got {value}")
        return value

    @model_validator(mode="after")
    def _unique_judges(self) -> RunConfig:
        names = [j.name for j in self.judges]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate judge names {dupes}")
        return self
