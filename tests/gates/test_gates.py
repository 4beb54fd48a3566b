"""The gate runner and its memo: a gate runs again whenever the stored bytes change."""

from __future__ import annotations

import json
import os
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

    from tasks.gates.runner import gx_results

    df = pd.DataFrame({"row_id": ["r1"], "x": [1]})
    gx_results("quiet", df, [Expect("ExpectColumnValuesToNotBeNull", column="x")])
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
import json
from pathlib import Path
import pandas as pd
from tasks.gates import Check, Expect, run_gate
df = pd.DataFrame({{"pair_id": ["p1"], "ok": [True]}})
checks = [Check(Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True]), "ok")]
run_gate("stage", df, checks, id_column="pair_id", memo_dir=Path({str(tmp_path)!r}))
from tasks.gates import runner as gate_runner
print(gate_runner._runner is not None or "great_expectations" in sys.modules)
"""
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=dict(os.environ)) for _ in range(2)]  # fmt: skip
    assert [r.stdout.strip() for r in runs] == ["True", "False"], [r.stderr for r in runs]
    assert [r.stderr for r in runs] == ["", ""]  # the gate runner shares stderr: it is quiet


def _round_trip_cases() -> list[tuple[pd.DataFrame, list[Expect]]]:
    """Tables and expectations of the kinds the stages' gates use, passing and failing, with
    the dtypes their tables hold (text, integers, booleans, floats with NaN, bytes, None)."""
    df = pd.DataFrame(
        {
            "pair_id": ["p1", "p2", "p2", "p4"],
            "seed": [0, 1, 1, 7],
            "ok": [True, False, True, True],
            "score": [0.5, float("nan"), 1.5, 0.25],
            "answer": [b"a", b"b", b"b", b"\x00"],
            "label": ["A", None, "B", "Z"],
            # Derived check columns and ids of object dtype, as the stages build them.
            "flag": pd.Series([True, False, None, True], dtype=object),
            "n": pd.Series([1, 2, 3, None], dtype=object),
        }
    )
    expectations = [
        Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True]),
        Expect("ExpectColumnValuesToBeInSet", column="label", value_set=["A", "B", "T"]),
        Expect("ExpectColumnValuesToBeUnique", column="pair_id"),
        Expect("ExpectColumnValuesToNotBeNull", column="label"),
        Expect("ExpectCompoundColumnsToBeUnique", column_list=["pair_id", "seed"]),
        Expect("ExpectColumnValuesToBeBetween", column="score", min_value=0, max_value=1),
        Expect("ExpectColumnValuesToBeInSet", column="seed", value_set=[0, 1, 2, 3]),
        Expect("ExpectColumnValuesToBeInSet", column="flag", value_set=[True]),
        Expect("ExpectColumnValuesToBeInSet", column="n", value_set=[1, 2]),
        Expect("ExpectColumnValuesToNotBeNull", column="flag"),
    ]
    clean = df.iloc[[0, 3]].assign(ok=True, label="A", seed=[0, 1], score=[0.5, 0.25])
    clean = clean.assign(flag=pd.Series([True, True], dtype=object, index=clean.index))
    clean = clean.assign(n=pd.Series([1, 2], dtype=object, index=clean.index))
    return [(df, expectations), (clean, expectations), (df.iloc[:0], expectations[:3])]


@pytest.mark.parametrize("case", range(3))
def test_a_gate_run_by_the_gate_runner_answers_as_one_run_here(case: int) -> None:
    """The command's gate runner (`answer_gate` over `gate_request`'s Arrow bytes, in its
    child process) gives the very results of great-expectations in this process, failures
    and offending rows included."""
    from tasks.gates import runner as gate_runner
    from tasks.gates.runner import answer_gate, gate_request, gx_results

    df, expectations = _round_trip_cases()[case]
    here = gx_results("round-trip", df, expectations)
    body = gate_request("round-trip", df, expectations)
    assert body is not None
    assert json.loads(answer_gate(body)) == json.loads(json.dumps(here))
    answered = gate_runner.runner_results("round-trip", df, expectations)
    assert answered == json.loads(json.dumps(here))
    if case == 0:
        assert not any(r["success"] for r in here)
        assert here[2]["positions"]
        assert {df.pair_id.iloc[p] for p in here[2]["positions"]} == {"p2"}
    if case == 1:
        assert all(r["success"] for r in here), here


def test_a_table_arrow_would_change_is_gated_here() -> None:
    from tasks.gates.runner import gate_request

    mixed = pd.DataFrame({"value": [1, "one", None]})
    assert (
        gate_request("mixed", mixed, [Expect("ExpectColumnValuesToNotBeNull", column="value")])
        is None
    )
    nullable = pd.DataFrame({"n": pd.array([1, None], dtype="Int64")})
    check = Expect("ExpectColumnValuesToNotBeNull", column="n")
    body = gate_request("nullable", nullable, [check])
    assert body is None or json.loads(body.partition(b"\n")[0])["stage"] == "nullable"
    from tasks.gates.allowlist import GateRequestError

    with pytest.raises(GateRequestError, match="value_set"):
        Expect("ExpectColumnValuesToBeInSet", column="n", value_set={1})  # not a list


def test_a_gate_runner_that_died_leaves_the_gate_to_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tasks import gates
    from tasks.gates import runner as gate_runner

    monkeypatch.setattr(gate_runner, "_runner", None)
    monkeypatch.setattr(gate_runner, "_runner_failed", False)
    gates.preload_great_expectations()
    assert gate_runner._runner is not None
    gate_runner._runner.kill()
    gate_runner._runner.wait()
    df = pd.DataFrame({"id": ["a", "b"], "ok": [True, False]})
    check = Check(Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True]), "not ok")
    with pytest.raises(GateError) as info:
        run_gate("fallback", df, [check], id_column="id")
    assert "not ok (1 row; id b)" in str(info.value)
    assert gate_runner._runner_failed  # not tried again: the gates run here


def test_only_judgelines_expectations_can_be_made() -> None:
    """The allowlist: every kind and argument the gates use, nothing else (no row
    condition, no parser, no other expectation, no argument of another type)."""
    from tasks.gates.allowlist import ALLOWED, GateRequestError, read_head

    Expect("ExpectColumnValuesToBeBetween", column="seed", min_value=0, max_value=3)
    Expect("ExpectCompoundColumnsToBeUnique", column_list=["pair_id", "seed", "order"])
    refused = [
        ("ExpectColumnValuesToBeInSet", {"column": "a", "value_set": [1], "row_condition": "x"}),
        ("ExpectColumnValuesToBeInSet", {"column": "a", "value_set": [1],
                                         "condition_parser": "pandas"}),
        ("ExpectColumnValuesToMatchRegex", {"column": "a", "regex": "."}),
        ("ExpectColumnValuesToBeUnique", {"column": ["a"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "a", "value_set": [{"x": 1}]}),
        ("ExpectColumnValuesToBeBetween", {"column": "a", "min_value": "0", "max_value": 1}),
        ("ExpectColumnValuesToNotBeNull", {}),
        ("__class__", {}),
    ]  # fmt: skip
    for kind, kwargs in refused:
        with pytest.raises(GateRequestError):
            Expect(kind, **kwargs)
        head = {"stage": "s", "expectations": [[kind, kwargs]], "objects": []}
        with pytest.raises(GateRequestError):
            read_head(json.dumps(head).encode())
    for head in ({"stage": "s", "expectations": [], "objects": []},
                 {"stage": "s\n", "expectations": [["ExpectColumnValuesToBeUnique",
                                                     {"column": "a"}]], "objects": []},
                 {"stage": "s", "expectations": [], "objects": [], "extra": 1}):  # fmt: skip
        with pytest.raises(GateRequestError):
            read_head(json.dumps(head).encode())
    assert len(ALLOWED) == 5
