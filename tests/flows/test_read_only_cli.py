"""A read-only work dir (a read-only mount, or no write permission): `show`, `runs`,
`failures`, `diff` and `advise` read it as usual; `report` and `trends`, which write a file,
do their reading, then say in one line where they cannot write. They crashed writing the
warehouse's `.warehouse.*.duckdb`. `advise` writes nothing anywhere."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from support import REPO, persona_grids, read_only

from simjudge.persona import Persona
from tasks.runs.folder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir
from tests.flows.test_hostile_input import run_main

CSV = "prompt,left,right,label\n" + "".join(
    f"Question {i}: what is {i}+{i}?,It is {2 * i}.,It is {2 * i + 1}.,A\n" for i in range(6)
)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_read_only_work_dir_is_read(
    work: WorkDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.nightly import nightly_flow
    from schemas.config import RunConfig
    from simjudge.server import SimJudgeServer

    data = tmp_path / "pairs.csv"
    data.write_text(CSV, "utf-8")
    with SimJudgeServer() as server:
        config = RunConfig.model_validate(
            {
                "name": "ro",
                "k": 2,
                "datasets": [{"kind": "table", "path": str(data),
                              "mapping": "question=prompt,answer_a=left,answer_b=right,key=label"}],
                "judges": [{"name": "j", "base_url": server.base_url, "model": "strong",
                            "simulated": True}],
            }
        )  # fmt: skip
        flow = nightly_flow(
            config=config.model_dump(mode="json"), work_dir=str(work.root), run_id="A"
        )
        asyncio.run(flow)
    # The run read its own tables in memory: a reader across runs (trends) has to build one.
    assert not (work.root / "warehouse.duckdb").exists()
    report = RunFolder(work, "A").report.read_bytes()

    monkeypatch.setenv("COLUMNS", "200")  # a summary row on one line
    with read_only(work.root) as root:
        args = ("--work-dir", str(root))
        shown = run_main(monkeypatch, *args, "show", "A")
        assert shown.code == 0, shown.err
        assert "j · default" in shown.out and "score" in shown.out
        for command in (["runs"], ["failures", "A"], ["diff", "A", "A"]):
            result = run_main(monkeypatch, *args, *command)
            assert result.code == 0, (command, result.err)
        written = run_main(monkeypatch, *args, "report", "A")
        written.assert_one_paragraph(f"cannot write {root}/runs/A", "Read-only file system")
        trends = run_main(monkeypatch, *args, "trends", "--page")
        trends.assert_one_paragraph(f"cannot write in {root} (Read-only file system)")
        advised = run_main(monkeypatch, *args, "advise", "A")
        assert advised.code == 0 and advised.err == "", advised.err
        assert "advice within 1.00% changed decisions" in advised.out
    assert not (work.root / "warehouse.duckdb").exists()
    assert RunFolder(work, "A").report.read_bytes() == report


def _tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under `root` (folders too): mode, size and modification time."""
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    }


def test_advise_writes_nothing_anywhere(tmp_path: Path) -> None:
    """`advise` is a read: in a fresh process whose home, caches, state, Prefect home and
    temporary folder are all under one folder, that folder is the same after it, however
    often it is asked and at whatever budget (it once wrote `runs/RUN/advice.parquet`)."""
    work = WorkDir(tmp_path / "work")
    grid = persona_grids([(Persona(name="sure", skill=1.0), None)], pairs=40, k=4, seed=1)
    write_parquet_atomic(grid, RunFolder(work, "r1").outcomes)
    places = {name: tmp_path / name for name in ("home", "cache", "state", "config", "prefect",
                                                  "tmp")}  # fmt: skip
    for place in places.values():
        place.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "JUDGELINE_"))}
    env |= {"HOME": str(places["home"]), "XDG_CACHE_HOME": str(places["cache"]),
            "XDG_STATE_HOME": str(places["state"]), "XDG_CONFIG_HOME": str(places["config"]),
            "PREFECT_HOME": str(places["prefect"]), "TMPDIR": str(places["tmp"])}  # fmt: skip
    before = _tree(tmp_path)
    judgeline = str(REPO / ".venv" / "bin" / "judgeline")
    for args in (["advise", "r1"], ["advise", "r1", "--max-change", "20%", "--json"]):
        done = subprocess.run(
            [judgeline, "--work-dir", str(work.root), *args], capture_output=True, text=True,
            env=env, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert _tree(tmp_path) == before, args


READS = (
    ["runs"],
    ["runs", "--json"],
    ["show", "R"],
    ["show", "R", "--json"],
    ["report", "R"],
    ["diff", "R", "R"],
    ["trends"],
    ["advise", "R"],
    ["failures", "R"],
)
"""The read-only commands, each on the finished run R (and `estimate` of its configuration)."""


@pytest.mark.slow
def test_reads_of_a_finished_run_write_nothing_anywhere(tmp_path: Path) -> None:
    """A run made by `judgeline run` in a fresh process whose home, caches, state and
    temporary folder are all under one folder; then every read-only command, each in a
    process of its own: no file under that folder is created or changed (a report of a run
    that did not change is not written again; trends build their warehouse in memory)."""
    from schemas.config import RunConfig
    from simjudge.server import SimJudgeServer

    places = {name: tmp_path / name for name in ("home", "cache", "state", "tmp")}
    for place in places.values():
        place.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "JUDGELINE_"))}
    env |= {"HOME": str(places["home"]), "XDG_CACHE_HOME": str(places["cache"]),
            "XDG_STATE_HOME": str(places["state"]), "TMPDIR": str(places["tmp"]),
            "JUDGELINE_SERVER_IDLE_SECONDS": "30", "COLUMNS": "120"}  # fmt: skip
    judgeline = str(REPO / ".venv" / "bin" / "judgeline")
    work = tmp_path / "work"
    data = tmp_path / "pairs.csv"
    data.write_text(CSV, "utf-8")
    with SimJudgeServer() as server:
        config = tmp_path / "run.yaml"
        config.write_text(RunConfig.model_validate({
            "name": "ro", "k": 2,
            "datasets": [{"kind": "table", "path": str(data),
                          "mapping": "question=prompt,answer_a=left,answer_b=right,key=label"}],
            "judges": [{"name": "j", "base_url": server.base_url, "model": "strong",
                        "simulated": True}],
        }).model_dump_json(), "utf-8")  # fmt: skip

        def judgeline_(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([judgeline, "--work-dir", str(work), *args], env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip

        made = judgeline_("run", str(config), "--run-id", "R")
        assert made.returncode == 0, made.stderr
        home = places["state"] / "judgeline" / "prefect"
        try:
            judgeline_("server", "stop", "--force")
            before = _tree(tmp_path)
            for args in [*READS, ["estimate", str(config)]]:
                done = judgeline_(*args)
                assert done.returncode == 0, (args, done.stderr)
                after = _tree(tmp_path)
                changed = sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
                assert not changed, (args, changed[:10])
        finally:
            from flows.localserver import stop_server

            stop_server(home)
