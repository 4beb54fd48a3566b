"""The demo over several nights: a growing benchmark, a drift probe, and a judge that drifts.

Night n of N judges the first pairs of the demo benchmark (all of them on the last night, a
tenth of them fewer per earlier night), written to one table file in the work dir that grows
like a real benchmark's. The run configuration is the one-night demo's plus a drift probe of
`strong` and the default alarms. From the second night the simulated judge serves `strong`
with a left bias (`DRIFT`): the main run cannot see it (the shared pairs' calls are cached),
the probe's fresh calls do. Each night has its own probe date, consecutive days ending
today: the demo's simulated calendar.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from schemas.config import AlarmSpec, DatasetSpec, ProbeSpec, RunConfig
from schemas.run import RunRecord
from simjudge.demo import DEMO_PERSONAS, demo_config
from simjudge.persona import PRESETS, Persona, persona_file_text
from tasks.errors import InputError
from tasks.history.alarms import alarm_text
from tasks.history.probe import PROBE_DATE_ENV
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.storage import write_text_atomic
from tasks.store.workdir import WorkDir

__all__ = [
    "DRIFT",
    "DRIFTING",
    "Night",
    "night_dataset",
    "night_lines",
    "night_personas",
    "nights_config",
    "plan_nights",
    "probe_date",
    "write_night_files",
]

DRIFTING = "strong"
"""The persona that drifts from the second night on, and the one the probe watches."""

DRIFT = {"left_bias": 0.6, "skill": 0.7}
"""What changes about it: it picks the answer shown first 60% of the time whatever it says,
and otherwise the better answer less often (0.7 instead of 0.9)."""

MAPPING = "pair_id=id,question=q,answer_a=x,answer_b=y,key=k"
"""The columns of the nights' table file."""


@dataclass(frozen=True)
class Night:
    """One night of the demo: how many pairs it judges, its probe date, whether `DRIFTING`
    has drifted."""

    number: int
    pairs: int
    date: dt.date
    drifted: bool

    def title(self, nights: int) -> str:
        """The night's heading in the terminal."""
        drift = ", ".join(f"{k} {v}" for k, v in DRIFT.items())
        return (
            f"night {self.number} of {nights} (simulated date {self.date}): {self.pairs} pairs"
            + (f"; {DRIFTING} has drifted ({drift})" if self.drifted else "")
        )


def plan_nights(nights: int, pairs: int, today: dt.date) -> list[Night]:
    """The nights, first to last: the last judges `pairs` pairs, each earlier one a tenth of
    `pairs` fewer; the dates are consecutive days ending `today`."""
    step = max(1, pairs // 10)
    first = pairs - step * (nights - 1)
    if nights < 1 or not 1 <= pairs <= len(demo_pairs()) or first < 1:
        raise InputError(
            f"the demo cannot spread {pairs} pairs over {nights} nights: the last night judges "
            f"at most {len(demo_pairs())} pairs, and each earlier one {step} fewer"
        )
    return [
        Night(n, pairs - step * (nights - n), today - dt.timedelta(days=nights - n), n > 1)
        for n in range(1, nights + 1)
    ]


def night_personas(night: Night) -> tuple[Persona, ...]:
    """The demo's personas as the simulated judge serves them on `night`."""
    return tuple(
        p.model_copy(update=DRIFT) if night.drifted and p.name == DRIFTING else p
        for p in PRESETS
        if p.name in DEMO_PERSONAS
    )


@contextmanager
def probe_date(day: dt.date) -> Iterator[None]:
    """`PROBE_DATE_ENV` set to `day` inside the block (the night's probe date), restored after."""
    saved = os.environ.get(PROBE_DATE_ENV)
    os.environ[PROBE_DATE_ENV] = day.isoformat()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(PROBE_DATE_ENV, None)
        else:
            os.environ[PROBE_DATE_ENV] = saved


def _folder(work: WorkDir) -> Path:
    path = work.root / "demo-nights"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_night_files(work: WorkDir, night: Night) -> tuple[Path, Path]:
    """Write the night's pairs (the table file, overwritten each night) and personas (one
    file per night); return their paths."""
    folder = _folder(work)
    rows = [
        {"id": p.pair_id, "q": p.question, "x": p.answer_a, "y": p.answer_b, "k": p.key}
        for p in demo_pairs()[: night.pairs]
    ]
    table = folder / "pairs.jsonl"
    write_text_atomic("".join(json.dumps(r) + "\n" for r in rows), table, overwrite=True)
    personas = folder / f"personas-night-{night.number}.json"
    write_text_atomic(persona_file_text(night_personas(night)), personas, overwrite=True)
    return table, personas


def night_dataset(table: Path) -> DatasetSpec:
    """The nights' table file as a dataset named like the one-night demo's."""
    return DatasetSpec(kind="table", path=str(table), mapping=MAPPING, dataset="demo")


def nights_config(base_url: str, table: Path, probe_pairs: int = 20) -> RunConfig:
    """The one-night demo's configuration on the nights' table file, with a drift probe of
    `DRIFTING` and the default alarms."""
    data = demo_config(base_url).model_dump(mode="json")
    data["datasets"] = [night_dataset(table).model_dump()]
    data["probe"] = ProbeSpec(pairs=probe_pairs, judges=[DRIFTING]).model_dump()
    data["alarms"] = AlarmSpec().model_dump()
    return RunConfig.model_validate(data)


def night_lines(record: RunRecord) -> list[str]:
    """What a night's run did, for the terminal: its calls, the probe's agreement with the
    previous night per judge config, and every alarm it raised with its figures."""
    calls = record.calls
    lines = [
        f"run {record.run_id}: {calls.get('planned', 0)} planned calls, "
        f"{calls.get('sent', 0)} sent, {calls.get('cached', 0)} reused from the cache"
    ]
    agreement: dict[str, dict[str, float]] = (record.probe or {}).get("agreement") or {}  # type: ignore[assignment]
    for name, a in agreement.items():
        lines.append(
            f"probe of {name}: agreement with the previous night {a['agreement']:.1%} "
            f"(95% {a['low']:.1%} to {a['high']:.1%})"
        )
    lines += [f"alarm {alarm_text(alarm)}" for alarm in record.alarms or []]
    return lines
