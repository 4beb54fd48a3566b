"""Drift probes: a fixed, seeded sample of pairs judged again on every run with fresh calls.

Every call is cached forever, so a provider that changed the model behind the same name is
never asked again by the main run. A probe freezes its sample as a manifest of its own
(the same bytes), plans its full grid, and sends those calls in a cache scope that holds the
run's UTC date (`tasks.judging.callkey.CallKeyer`): cached within the night, new the next.
It is a run of its own, `<run_id>-probe`, remapped through the same gates; then its outcomes
are compared slot by slot with the previous probe's: agreement per judge config with a 95%
Wilson interval, and how many pairs changed disposition (and from what to what).
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd

from schemas import Pair
from schemas.config import ProbeSpec, RunConfig
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.hashing import digest
from tasks.ingest.manifest import freeze_manifest, read_manifest
from tasks.judging.request import JudgeRequest, StageHooks
from tasks.judging.stage import run_judge_stage
from tasks.plan import make_plan, write_plan
from tasks.remap.outcomes import remap_run, write_remap
from tasks.runs.check import readable
from tasks.runs.folder import RunFolder, is_run_id
from tasks.runs.record import list_records
from tasks.store.workdir import WorkDir

__all__ = [
    "PROBE_DATE_ENV",
    "PROBE_SUFFIX",
    "compare_probes",
    "previous_probe",
    "probe_judges",
    "probe_sample",
    "probe_scope",
    "run_probe",
    "wilson_interval",
]

PROBE_SUFFIX = "-probe"
SLOT = ["judge", "config", "dataset", "pair_id", "seed", "order"]
CELL = ["judge", "config", "dataset", "pair_id", "seed"]


PROBE_DATE_ENV = "JUDGELINE_PROBE_DATE"
"""Environment variable that overrides the probe's date (ISO `YYYY-MM-DD`): for replaying a
night, and for tests of a served deployment, where nothing can be patched."""


def _today() -> dt.date:
    """The UTC date that scopes the probe's calls (`PROBE_DATE_ENV` when set)."""
    override = os.environ.get(PROBE_DATE_ENV)
    if override:
        try:
            return dt.date.fromisoformat(override)
        except ValueError:
            raise InputError(
                f"{PROBE_DATE_ENV}={override!r} is not a date; expected YYYY-MM-DD"
            ) from None
    return dt.datetime.now(dt.UTC).date()


def probe_scope(today: dt.date | None = None) -> str:
    """The cache scope of the probe's calls on `today` (default: the probe's date)."""
    return f"probe {(today or _today()).isoformat()}"


def probe_judges(cfg: RunConfig) -> tuple[JudgeSpec, ...]:
    """The judges the probe asks (all of the run's unless `probe.judges` names some)."""
    spec = cfg.probe
    names = None if spec is None else spec.judges
    return tuple(j for j in cfg.judges if names is None or j.name in names)


def probe_sample(manifest: pd.DataFrame, spec: ProbeSpec) -> list[str]:
    """The probe's pair ids: the `spec.pairs` pairs with the smallest digest of (seed, dataset,
    pair id). A pair keeps its place however many pairs the dataset gains, so the sample of a
    growing dataset changes only where a new pair ranks among the sampled ones."""
    ranked = sorted(
        (digest("judgeline-probe", spec.rng_seed, d, p), p)
        for d, p in zip(manifest["dataset"], manifest["pair_id"], strict=True)
    )
    return sorted(p for _, p in ranked[: spec.pairs])


def wilson_interval(agree: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (NaN bounds when n is 0)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = agree / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def compare_probes(now: RunFolder, before: RunFolder) -> dict[str, Any]:
    """This probe against the previous one, over the slots both judged."""
    cols = [*SLOT, "outcome"]
    joined = pd.read_parquet(now.outcomes, columns=cols).merge(
        pd.read_parquet(before.outcomes, columns=cols), on=SLOT, suffixes=("", "_before")
    )
    agreement: dict[str, dict[str, float]] = {}
    for (judge, config), group in joined.groupby(["judge", "config"], sort=True):
        agree = int((group["outcome"] == group["outcome_before"]).sum())
        low, high = wilson_interval(agree, len(group))
        agreement[f"{judge} · {config}"] = {
            "slots": len(group),
            "agreement": agree / len(group),
            "low": low,
            "high": high,
        }
    dcols = [*CELL, "disposition"]
    cells = pd.read_parquet(now.table("dispositions"), columns=dcols).merge(
        pd.read_parquet(before.table("dispositions"), columns=dcols),
        on=CELL,
        suffixes=("", "_before"),
    )
    moved = cells[cells["disposition"] != cells["disposition_before"]]
    shifts = Counter(
        f"{a} -> {b}"
        for a, b in zip(moved["disposition_before"], moved["disposition"], strict=True)
    )
    return {
        "previous": before.run_id,
        "agreement": agreement,
        "cells": len(cells),
        "shifted": len(moved),
        "shifts": dict(sorted(shifts.items())),
    }


def previous_probe(work: WorkDir, name: str, run_id: str) -> RunFolder | None:
    """The latest earlier run of the same benchmark name whose probe was remapped and can be
    read (one that cannot is skipped with a warning, `tasks.runs.check`)."""
    for record in list_records(work):  # newest first
        probe = record.probe or {}
        if record.run_id == run_id or record.name != name or not probe.get("run_id"):
            continue
        if not is_run_id(str(probe["run_id"])):
            continue  # not a probe judgeline made: never followed
        folder = RunFolder(work, str(probe["run_id"]))
        if folder.outcomes.is_file() and readable(folder):
            return folder
    return None


async def run_probe(
    work: WorkDir,
    run_id: str,
    manifest_hash: str,
    cfg: RunConfig,
    *,
    hooks: StageHooks | None = None,
    today: dt.date | None = None,
) -> dict[str, Any]:
    """Judge the probe sample of `manifest_hash` afresh and compare it with the last probe."""
    spec = cfg.probe
    if spec is None:
        raise ValueError("the run configuration has no probe")
    day = today or _today()
    _, manifest = read_manifest(work, manifest_hash)
    rows = manifest.to_pandas()
    chosen = set(probe_sample(rows, spec))
    fields = list(Pair.model_fields)
    pairs: Sequence[Pair] = [
        Pair.model_validate({f: r[f] for f in fields})
        for r in manifest.to_pylist()
        if r["pair_id"] in chosen
    ]
    frozen = freeze_manifest([(f"probe of {manifest_hash[:16]}", list(pairs))], work)
    _, probe_manifest = read_manifest(work, frozen.info.manifest_hash)
    info, table = make_plan(probe_manifest, cfg.k, "full", None)
    write_plan(work, info, table)
    judges = probe_judges(cfg)
    probe_run = f"{run_id}{PROBE_SUFFIX}"
    request = JudgeRequest(
        work=work,
        run_id=probe_run,
        plan_id=info.plan_id,
        judges=judges,
        template_id=cfg.template,
        batch_size=cfg.batch_size,
        scope=probe_scope(day),
    )
    counts = await run_judge_stage(request, hooks=hooks)
    write_remap(work, remap_run(work, probe_run))
    result: dict[str, Any] = {
        "run_id": probe_run,
        "date": day.isoformat(),
        "pairs": len(pairs),
        "calls": {k: counts.get(k) for k in ("planned", "sent", "cached", "failed")},
    }
    before = previous_probe(work, cfg.name, run_id)
    if before is not None:
        result.update(compare_probes(RunFolder(work, probe_run), before))
    return result
