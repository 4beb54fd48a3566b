"""A live run following advice: accepted for paired_unanimity or paired_strict, else refused."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from schemas.advice import AdviceRow
from schemas.arrow import arrow_schema
from schemas.config import LiveSpec
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.live.advice import advised_savings
from tasks.runfolder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.workdir import WorkDir


def _write_advice(work: WorkDir, policies: dict[str, str], certificate: str = "certified") -> None:
    rows = [
        {
            "judge": "j",
            "config": config,
            "policy": policy,
            "rank": "advised",
            "max_change": 0.01,
            "level": 0.95,
            "pairs": 400,
            "savings": 0.25,
            "change": 0.002,
            "reversal": 0.0,
            "change_range": 0.5,
            "change_bound": 0.008 if certificate == "certified" else 0.013,
            "certificate": certificate,
            "note": "n",
        }
        for config, policy in policies.items()
    ]
    table = pa.Table.from_pylist(rows, schema=arrow_schema(AdviceRow))
    write_parquet_atomic(table, RunFolder(work, "r1").table("advice"), overwrite=True)


def _judges() -> list[JudgeSpec]:
    return [
        JudgeSpec.model_validate(
            {
                "name": "j",
                "base_url": "http://127.0.0.1:1/v1",
                "model": "m",
                "configs": [{"name": "low"}, {"name": "high"}],
            }
        )
    ]


def test_live_spec_names_the_advising_run() -> None:
    assert LiveSpec(policy="advised", advised_by="r1", rng_seed=0).advised_by == "r1"
    with pytest.raises(ValidationError, match="advised_by"):
        LiveSpec(policy="advised", rng_seed=0)
    with pytest.raises(ValidationError, match="advised_by"):
        LiveSpec(advised_by="r1", rng_seed=0)


def test_advice_is_followed_only_where_the_live_engine_reproduces_it(tmp_path: Path) -> None:
    work = WorkDir.at(tmp_path)
    with pytest.raises(InputError, match="has no advice"):
        advised_savings(work, "r1", _judges())
    _write_advice(work, {"low": "paired_unanimity", "high": "paired_strict"})
    assert advised_savings(work, "r1", _judges()) == {("j", "low"): 0.25, ("j", "high"): 0.25}
    _write_advice(work, {"low": "paired_unanimity", "high": "paired_nonstrict"})
    with pytest.raises(InputError, match="advises paired_nonstrict for judge 'j' config 'high'"):
        advised_savings(work, "r1", _judges())
    _write_advice(work, {"low": "paired_unanimity"})
    with pytest.raises(InputError, match="no advice for judge 'j' config 'high'"):
        advised_savings(work, "r1", _judges())


def test_advice_without_a_certificate_is_refused(tmp_path: Path) -> None:
    """docs/design.md#advice: only certified advice is followed, whatever the policy."""
    work = WorkDir.at(tmp_path)
    _write_advice(work, {"low": "paired_strict", "high": "paired_strict"}, certificate="over")
    with pytest.raises(InputError, match=r"without a certificate \(over: bound 1.30% against"):
        advised_savings(work, "r1", _judges())
    # Advice written before certificates existed has no certificate column: refused too.
    old = pa.table({"judge": ["j"], "config": ["low"], "rank": ["advised"],
                    "policy": ["paired_strict"], "holdout_savings": [0.25]})  # fmt: skip
    write_parquet_atomic(old, RunFolder(work, "r1").table("advice"), overwrite=True)
    with pytest.raises(InputError, match="written before advice was certified"):
        advised_savings(work, "r1", _judges())
