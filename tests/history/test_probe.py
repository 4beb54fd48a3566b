"""Drift probes: fresh calls every night for a fixed sample, compared with the last night's;
a judge that changed behind the same name is caught, and the alarm is raised."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pandas as pd
import pytest

from flows.nightly import nightly_flow
from schemas.config import AlarmSpec, DatasetSpec, ProbeSpec, RunConfig
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.history.probe import probe_sample, wilson_interval
from tasks.judging.callkey import CallKeyer
from tasks.store.workdir import WorkDir


def test_probe_sample_is_fixed_and_survives_growth() -> None:
    ids = [f"p{i:03d}" for i in range(200)]
    frame = pd.DataFrame({"dataset": "d", "pair_id": ids})
    spec = ProbeSpec(pairs=10, rng_seed=3)
    sample = probe_sample(frame, spec)
    assert len(sample) == 10 and sample == probe_sample(frame.sample(frac=1, random_state=1), spec)
    grown = pd.concat([frame, pd.DataFrame({"dataset": "d", "pair_id": ["new-1", "new-2"]})])
    # A grown dataset keeps every sampled pair but those a new pair outranks (at most two).
    assert len(set(sample) & set(probe_sample(grown, spec))) >= 8
    assert probe_sample(frame, ProbeSpec(pairs=10, rng_seed=4)) != sample


def test_a_scope_makes_new_keys_and_no_scope_keeps_the_old() -> None:
    spec = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m")
    config = spec.configs[0]
    args: dict[str, Any] = {"seed": 0, "repeat": 0, "template_id": "t", "template_hash": "h",
                            "messages_digest": "d" * 64}  # fmt: skip
    plain = CallKeyer(spec, config).key(**args)
    assert CallKeyer(spec, config, None).key(**args) == plain
    night1 = CallKeyer(spec, config, "probe 2026-11-30").key(**args)
    assert night1 != plain and night1 != CallKeyer(spec, config, "probe 2026-12-01").key(**args)


def test_wilson_interval() -> None:
    low, high = wilson_interval(90, 100)
    assert 0.82 < low < 0.9 < high < 0.95
    assert wilson_interval(0, 0) != wilson_interval(0, 0)  # NaN bounds


@pytest.mark.slow
def test_two_nights_catch_a_judge_that_changed(
    prefect_harness: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.history.probe as probe_module

    work = WorkDir(tmp_path / "work")
    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="judge", simulated=True)
    records, requests = [], []
    nights = [("n1", 0.0, dt.date(2026, 11, 29)), ("n2", 0.9, dt.date(2026, 11, 30))]
    for run_id, left_bias, day in nights:
        persona = Persona(name="judge", skill=0.9, left_bias=left_bias, tie_rate=0.03)
        monkeypatch.setattr(probe_module, "_today", lambda day=day: day)
        with SimJudgeServer([persona]) as server:
            config = RunConfig(
                name="drift",
                datasets=[DatasetSpec(kind="demo")],
                judges=[judge.model_copy(update={"base_url": server.base_url})],
                k=2,
                probe=ProbeSpec(pairs=12, rng_seed=5),
                alarms=AlarmSpec(),
            )
            records.append(
                asyncio.run(
                    nightly_flow(
                        config=config.model_dump(mode="json"),
                        work_dir=str(work.root),
                        run_id=run_id,
                    )  # fmt: skip
                )
            )
            requests.append(len(server.request_log()))
    first, second = records
    probe_calls = 12 * 2 * 2
    # Night 2 reuses every main call and pays only for its probe's fresh calls.
    assert requests == [first["calls"]["sent"] + probe_calls, probe_calls]
    assert first["calls"]["sent"] > 500 and second["calls"]["sent"] == 0
    assert first["probe"]["calls"]["sent"] == probe_calls and "agreement" not in first["probe"]
    [(name, agreement)] = second["probe"]["agreement"].items()
    assert name == "j · default" and agreement["slots"] == probe_calls
    assert agreement["agreement"] < 0.8 and agreement["high"] < 0.95
    assert second["probe"]["previous"] == "n1-probe" and second["probe"]["shifted"] > 0
    kinds = {a["alarm"] for a in second["alarms"]}
    assert "probe_agreement" in kinds and first["alarms"] == []


def test_the_estimate_lists_the_probe_calls_per_judge_config(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks.history.probe import PROBE_DATE_ENV
    from tasks.judging.estimate import estimate_config

    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="judge")
    config = RunConfig(
        name="drift",
        datasets=[DatasetSpec(kind="demo")],
        judges=[judge],
        k=2,
        probe=ProbeSpec(pairs=12, rng_seed=5),
    )
    path = tmp_path / "run.yaml"
    path.write_text(config.model_dump_json(), encoding="utf-8")
    monkeypatch.setenv(PROBE_DATE_ENV, "2026-11-30")
    rows = {r.config: r for r in estimate_config(path, WorkDir(tmp_path / "work"))}
    assert set(rows) == {"default", "default (probe)"}
    assert rows["default"].planned_calls > 500  # the full grid (identical prompts share a key)
    probe = rows["default (probe)"]
    assert probe.planned_calls == probe.calls_to_send == 12 * 2 * 2
    assert probe.pu_expected_calls is None


def test_a_probe_date_override_that_is_not_a_date_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tasks.errors import InputError
    from tasks.history.probe import PROBE_DATE_ENV, probe_scope

    monkeypatch.setenv(PROBE_DATE_ENV, "2026-11-30")
    assert probe_scope() == "probe 2026-11-30"
    monkeypatch.setenv(PROBE_DATE_ENV, "tonight")
    with pytest.raises(InputError, match="JUDGELINE_PROBE_DATE='tonight' is not a date"):
        probe_scope()
