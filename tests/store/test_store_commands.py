"""Commands on a work dir in an object store (moto on loopback) name the store's URLs, never
the scratch copy's paths: `freeze`, `plan` and `advise` print where they wrote in the store;
`replay` reads its `--calls` from a store URL and writes its `--out` to one."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support import persona_grids

from simjudge.persona import Persona
from tasks.runs.folder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.store import SCRATCH_ENV
from tasks.store.workdir import WorkDir
from tests.flows.test_hostile_input import run_main

PERSONA = Persona(name="steady", skill=0.8, left_bias=0.1, tie_rate=0.1)


def _store_run(bucket_url: str, tmp_path: Path) -> None:
    """A run `A` whose outcomes are in the store, written from another machine."""
    writer = WorkDir.at(bucket_url, scratch=tmp_path / "writer")
    folder = RunFolder(writer, "A").create()
    grid = persona_grids([(PERSONA, None)], pairs=12, k=2, seed=3)
    write_parquet_atomic(grid, folder.outcomes, overwrite=True)


def test_freeze_plan_and_advise_print_the_stores_urls(
    bucket_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    monkeypatch.setenv(SCRATCH_ENV, str(scratch))
    args = ("--work-dir", bucket_url)
    frozen = run_main(monkeypatch, *args, "freeze", "--demo")
    assert frozen.code == 0, frozen.err
    assert f"written to {bucket_url}/manifests/" in frozen.out, frozen.out
    manifest = frozen.out.split(f"{bucket_url}/manifests/")[1].split()[0]
    planned = run_main(monkeypatch, *args, "plan", manifest, "--k", "2")
    assert planned.code == 0, planned.err
    assert f"written to {bucket_url}/plans/" in planned.out, planned.out

    missing = run_main(monkeypatch, *args, "advise", "B")
    assert missing.code == 2
    assert f"{bucket_url}/runs/B/outcomes.parquet" in missing.err, missing.err

    _store_run(bucket_url, tmp_path)
    advised = run_main(monkeypatch, *args, "advise", "A")
    assert advised.code == 0, advised.err
    assert "Nothing is written" in advised.out, advised.out
    for result in (frozen, planned, missing, advised):
        assert str(scratch) not in result.out + result.err


def test_replay_reads_and_writes_store_urls(
    bucket_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store_run(bucket_url, tmp_path)
    scratch = tmp_path / "scratch"
    monkeypatch.setenv(SCRATCH_ENV, str(scratch))
    monkeypatch.chdir(tmp_path)
    out = f"{bucket_url}/replays/first"
    replayed = run_main(monkeypatch, "replay", "--calls", f"{bucket_url}/runs/A/outcomes.parquet",
                        "--out", out, "--design", "balanced")  # fmt: skip
    assert replayed.code == 0, replayed.err
    assert f"summary: {out}/summary.parquet" in replayed.out, replayed.out
    assert str(scratch) not in replayed.out
    assert not (tmp_path / "s3:").exists()
    # Another machine reads the tables from the store.
    reader = WorkDir.at(bucket_url, scratch=tmp_path / "reader")
    summary = reader.fresh("replays", "first") / "summary.parquet"
    assert pq.read_table(summary).num_rows > 0

    # Any parquet file in a store, not only a run's outcomes.
    writer = WorkDir.at(bucket_url, scratch=tmp_path / "writer2")
    (writer.root / "inputs").mkdir(parents=True)
    grid = persona_grids([(PERSONA, None)], pairs=6, k=2, seed=4)
    write_parquet_atomic(grid, writer.root / "inputs" / "grid.parquet")
    other = run_main(monkeypatch, "replay", "--calls", f"{bucket_url}/inputs/grid.parquet",
                     "--out", str(tmp_path / "local"), "--design", "common")  # fmt: skip
    assert other.code == 0, other.err
    assert pq.read_table(tmp_path / "local" / "summary.parquet").num_rows > 0

    missing = run_main(monkeypatch, "replay", "--calls", f"{bucket_url}/runs/Z/outcomes.parquet",
                       "--out", str(tmp_path / "local"))  # fmt: skip
    assert missing.code == 2
    assert f"{bucket_url}/runs/Z/outcomes.parquet" in missing.err, missing.err
    assert "s3:/" + bucket_url.split("://")[1] not in missing.err  # the URL unmangled
