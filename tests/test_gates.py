"""The gate runner and its memo: a gate runs again whenever the stored bytes change."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tasks.errors import GateError
from tasks.gates import Check, Expect, gate_once, run_gate


def test_run_gate_names_offending_rows() -> None:
    df = pd.DataFrame({"pair_id": ["p1", "p2", "p2"], "ok": [True, False, True]})
    checks = [
        Check(Expect("ExpectColumnValuesToBeUnique", column="pair_id"), "ids are unique"),
        Check(Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True]), "ok"),
    ]
    with pytest.raises(GateError) as info:
        run_gate("stage", df, checks, id_column="pair_id")
    assert info.value.failures == [
        "ids are unique (2 rows; pair_id p2, p2)",
        "ok (1 row; pair_id p2)",
    ]
    run_gate("stage", df.iloc[:1], checks, id_column="pair_id")  # the same checks, reused


def test_run_gate_takes_a_repeated_expectation_as_one_check() -> None:
    df = pd.DataFrame({"pair_id": ["p1", "p2"], "ok": [True, False]})
    unique = Expect("ExpectColumnValuesToBeUnique", column="pair_id")
    is_ok = Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True])
    same = Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True])
    checks = [Check(is_ok, "ok"), Check(unique, "ids are unique"), Check(same, "ok"),
              Check(is_ok, "ok is true")]  # fmt: skip
    with pytest.raises(GateError) as info:
        run_gate("stage", df, checks, id_column="pair_id")
    assert info.value.stage == "stage"
    assert info.value.failures == ["ok (1 row; pair_id p2)", "ok is true (1 row; pair_id p2)"]
    run_gate("stage", df.iloc[:1], checks, id_column="pair_id")


def test_gate_once_skips_unchanged_bytes_and_reruns_on_change(tmp_path: Path) -> None:
    stored = tmp_path / "table.parquet"
    stored.write_bytes(b"version 1")
    calls: list[int] = []

    def gate() -> None:
        calls.append(1)

    memos = tmp_path / "memos"
    memos.mkdir()
    gate_once(memos, [stored], gate)
    gate_once(memos, [stored], gate)
    assert len(calls) == 1 and len(list(memos.iterdir())) == 1
    stored.write_bytes(b"version 2")
    gate_once(memos, [stored], gate)
    assert len(calls) == 2


def test_failed_gate_leaves_no_memo(tmp_path: Path) -> None:
    stored = tmp_path / "table.parquet"
    stored.write_bytes(b"bad")

    def gate() -> None:
        raise GateError("stage", ["bad bytes"])

    memos = tmp_path / "memos"
    memos.mkdir()
    for _ in range(2):
        with pytest.raises(GateError):
            gate_once(memos, [stored], gate)
    assert list(memos.iterdir()) == []
    missing = tmp_path / "absent.parquet"
    runs: list[int] = []
    gate_once(memos, [missing], lambda: runs.append(1))
    gate_once(memos, [missing], lambda: runs.append(1))
    assert runs == [1, 1]  # unreadable inputs are never memoised


def test_great_expectations_logs_nothing_below_a_warning() -> None:
    import logging

    df = pd.DataFrame({"row_id": ["r1"], "x": [1]})
    checks = [Check(Expect("ExpectColumnValuesToNotBeNull", column="x"), "x is set")]
    run_gate("quiet", df, checks, id_column="row_id")
    names = [n for n in logging.root.manager.loggerDict if n.startswith("great_expectations")]
    loud = [n for n in names if logging.getLogger(n).getEffectiveLevel() < logging.WARNING]
    assert names and not loud, loud


def test_a_table_that_passed_is_not_validated_again(tmp_path: Path) -> None:
    df = pd.DataFrame({"pair_id": ["p1", "p2"], "ok": [True, True]})
    checks = [Check(Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True]), "ok")]
    memos = tmp_path / "memos"
    memos.mkdir()
    run_gate("stage", df, checks, id_column="pair_id", memo_dir=memos)
    assert len(list(memos.iterdir())) == 1
    run_gate("stage", df.copy(), checks, id_column="pair_id", memo_dir=memos)
    assert len(list(memos.iterdir())) == 1  # the same bytes: the memo is the one written
    changed = df.assign(ok=[True, False])
    with pytest.raises(GateError):
        run_gate("stage", changed, checks, id_column="pair_id", memo_dir=memos)
    assert len(list(memos.iterdir())) == 1  # a failed table leaves no memo
    other = df.assign(pair_id=["p1", "p3"])
    run_gate("stage", other, checks, id_column="pair_id", memo_dir=memos)
    assert len(list(memos.iterdir())) == 2  # one changed byte: validated again


@pytest.mark.slow
def test_a_memoised_gate_does_not_import_great_expectations(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = f"""
import sys
from pathlib import Path
import pandas as pd
from tasks.gates import Check, Expect, run_gate
df = pd.DataFrame({{"pair_id": ["p1"], "ok": [True]}})
checks = [Check(Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True]), "ok")]
run_gate("stage", df, checks, id_column="pair_id", memo_dir=Path({str(tmp_path)!r}))
print("great_expectations" in sys.modules)
"""
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
            for _ in range(2)]  # fmt: skip
    assert [r.stdout.strip() for r in runs] == ["True", "False"], [r.stderr for r in runs]
