"""The demo's nights: which pairs, personas, probe date and configuration each night gets."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from schemas.config import AlarmSpec
from schemas.run import CodeVersion, RunRecord
from simjudge.demo import demo_config
from simjudge.demo_nights import (
    DRIFTING,
    night_lines,
    night_personas,
    nights_config,
    plan_nights,
    probe_date,
    write_night_files,
)
from simjudge.persona import PRESETS, Persona
from tasks.errors import InputError
from tasks.history.probe import PROBE_DATE_ENV, probe_scope
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.ingest.loaders import load_source
from tasks.store.workdir import WorkDir

TODAY = dt.date(2026, 3, 10)


def test_three_nights_grow_to_the_whole_benchmark_on_consecutive_days() -> None:
    nights = plan_nights(3, 150, TODAY)
    assert [n.number for n in nights] == [1, 2, 3]
    assert [n.pairs for n in nights] == [120, 135, 150]
    assert [n.date for n in nights] == [dt.date(2026, 3, 8), dt.date(2026, 3, 9), TODAY]
    assert [n.drifted for n in nights] == [False, True, True]
    assert "has drifted" in nights[1].title(3) and "has drifted" not in nights[0].title(3)


def test_a_small_demo_scales_its_step() -> None:
    assert [n.pairs for n in plan_nights(2, 20, TODAY)] == [18, 20]
    [only] = plan_nights(1, 150, TODAY)
    assert (only.pairs, only.date, only.drifted) == (150, TODAY, False)


@pytest.mark.parametrize(("nights", "pairs"), [(11, 150), (2, 151), (2, 0)])
def test_nights_that_do_not_fit_are_refused(nights: int, pairs: int) -> None:
    with pytest.raises(InputError, match=f"cannot spread {pairs} pairs over {nights} nights"):
        plan_nights(nights, pairs, TODAY)


def test_only_the_drifting_persona_changes_and_only_after_night_one() -> None:
    first, second = plan_nights(2, 150, TODAY)
    assert night_personas(first) == PRESETS
    drifted = {p.name: p for p in night_personas(second)}
    for preset in PRESETS:
        if preset.name == DRIFTING:
            assert drifted[preset.name].left_bias == 0.6 > preset.left_bias
            assert drifted[preset.name].skill == 0.7 < preset.skill
            assert drifted[preset.name].tie_rate == preset.tie_rate
        else:
            assert drifted[preset.name] == preset


def test_night_files_hold_the_first_pairs_and_the_nights_personas(tmp_path: Path) -> None:
    work = WorkDir(tmp_path / "work")
    night = plan_nights(3, 150, TODAY)[1]
    table, personas = write_night_files(work, night)
    config = nights_config("http://127.0.0.1:1/v1", table)
    spec = config.datasets[0]
    loaded = load_source(spec.kind, spec.path, mapping=spec.mapping, dataset=spec.dataset)
    # The one-night demo's first pairs (dataset, ids, texts, keys): its calls are reused.
    fields = ("dataset", "pair_id", "question", "answer_a", "answer_b", "key")
    assert [tuple(getattr(p, f) for f in fields) for p in loaded] == [
        tuple(getattr(p, f) for f in fields) for p in demo_pairs()[:135]
    ]
    served = [Persona.model_validate(p) for p in json.loads(personas.read_text("utf-8"))]
    assert tuple(served) == night_personas(night)


def test_nights_config_is_the_demo_with_a_probe_of_the_drifting_judge_and_alarms(
    tmp_path: Path,
) -> None:
    url = "http://127.0.0.1:1/v1"
    config = nights_config(url, tmp_path / "pairs.jsonl")
    demo = demo_config(url)
    assert config.judges == demo.judges and config.k == demo.k
    assert config.designs == demo.designs and config.name == demo.name
    assert config.probe is not None and config.probe.judges == [DRIFTING]
    assert config.probe.pairs == 20 and config.alarms == AlarmSpec()
    # The one-night demo keeps its configuration (and so its config hash).
    assert demo.probe is None and demo.alarms is None and demo.datasets[0].kind == "demo"


def test_probe_date_scopes_the_probe_inside_the_block_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PROBE_DATE_ENV, raising=False)
    with probe_date(dt.date(2026, 3, 8)):
        assert probe_scope() == "probe 2026-03-08"
    assert PROBE_DATE_ENV not in os.environ
    monkeypatch.setenv(PROBE_DATE_ENV, "2026-01-01")
    with probe_date(dt.date(2026, 3, 9)):
        assert probe_scope() == "probe 2026-03-09"
    assert os.environ[PROBE_DATE_ENV] == "2026-01-01"


def test_night_lines_name_calls_probe_agreement_and_alarms() -> None:
    record = RunRecord(
        run_id="r2", name="demo", status="degraded", config_hash="0" * 64, config={},
        code=CodeVersion(commit=None, dirty=None, packages={}),
        started_at=dt.datetime(2026, 3, 9, tzinfo=dt.UTC),
        calls={"planned": 1080, "sent": 120, "cached": 960},
        probe={"agreement": {"strong · low": {"agreement": 0.7, "low": 0.62, "high": 0.77,
                                               "slots": 160}}},
        alarms=[{"alarm": "probe_agreement", "run_id": "r2", "judge_config": "strong · low",
                 "value": 0.70004, "low": 0.62, "high": 0.77, "threshold": 0.8,
                 "previous": "r1"}],
    )  # fmt: skip
    # The interval's bounds were `low 0.62, high 0.77`, which read like config names.
    assert night_lines(record) == [
        "run r2: 1080 planned calls, 120 sent, 960 reused from the cache",
        "probe of strong · low: agreement with the previous night 70.0% (95% 62.0% to 77.0%)",
        "alarm probe_agreement: judge_config strong · low, value 0.7 (95% interval 0.62 to "
        "0.77), threshold 0.8, previous r1",
    ]
