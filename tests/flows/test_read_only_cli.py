"""A read-only work dir (a read-only mount, or no write permission): `show`, `runs`,
`failures` and `diff` read it as usual; `report`, `trends` and `advise`, which write a file,
do their reading, then say in one line where they cannot write. They crashed writing the
warehouse's `.warehouse.*.duckdb`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support import read_only

from tasks.runfolder import RunFolder
from tasks.workdir import WorkDir
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
    from tasks.simjudge.server import SimJudgeServer

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
        trends = run_main(monkeypatch, *args, "trends")
        trends.assert_one_paragraph(f"cannot write in {root} (Read-only file system)")
        advised = run_main(monkeypatch, *args, "advise", "A")
        advised.assert_one_paragraph(f"cannot write in {root}/runs/A (Read-only file system)")
        assert "advice within 1.00% changed decisions" in advised.out  # shown all the same
    assert not (work.root / "warehouse.duckdb").exists()
    assert RunFolder(work, "A").report.read_bytes() == report
