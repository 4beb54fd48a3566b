"""Order plans: the full grid, exact design enumerations, reproducible draws, the plan gate."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import Pair
from schemas.vocabulary import DESIGNS
from tasks.errors import GateError, InputError, IntegrityError
from tasks.hashing import digest
from tasks.ingest.manifest import freeze_manifest, read_manifest
from tasks.plan import (
    PLAN_FILE,
    design_assignments,
    draw_design,
    gate_plan,
    list_plans,
    make_plan,
    plan_full_grid,
    read_plan,
    resolve_plan_id,
    write_plan,
)
from tasks.store.workdir import WorkDir


def pairs(n: int, prefix: str = "p") -> list[Pair]:
    return [
        Pair(
            pair_id=f"{prefix}{i:03d}",
            dataset="toy",
            source="unit",
            question=f"q{i}",
            answer_a=f"a{i}",
            answer_b=f"b{i}",
            key="A" if i % 2 else "B",
        )
        for i in range(n)
    ]


def manifest(work: WorkDir, n: int = 5, prefix: str = "p") -> pa.Table:
    frozen = freeze_manifest([("unit", pairs(n, prefix))], work)
    return read_manifest(work, frozen.info.manifest_hash, gate=False)[1]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[WorkDir, pa.Table]:
    """One work dir with a 5-pair manifest, shared by the read-only tests."""
    work = WorkDir(tmp_path_factory.mktemp("plans") / "work")
    return work, manifest(work)


@pytest.mark.parametrize("k", [2, 4, 6])
def test_full_grid_has_every_condition_once(stored: tuple[WorkDir, pa.Table], k: int) -> None:
    _, table = stored
    grid = plan_full_grid(table, k)
    rows = grid.to_pylist()
    assert grid.num_rows == 2 * k * 5
    assert len({r["presentation_id"] for r in rows}) == len(rows)
    per_pair = Counter(r["pair_id"] for r in rows)
    assert set(per_pair.values()) == {2 * k}
    assert Counter((r["pair_id"], r["seed"], r["order"]) for r in rows).most_common(1)[0][1] == 1
    assert {r["seed"] for r in rows} == set(range(k))
    manifest_hash = table.column("manifest_hash")[0].as_py()
    for r in rows:
        assert (r["left_identity"], r["right_identity"]) == (
            ("A", "B") if r["order"] == "AB" else ("B", "A")
        )
        assert r["presentation_id"] == digest(manifest_hash, r["pair_id"], r["seed"], r["order"])
        assert r["plan_id"] == digest(manifest_hash, k, "full", None)


@pytest.mark.parametrize("k", [0, 1, 3, -2, 5, True, 4.0, 18, 100])
def test_k_must_be_even_and_at_least_two(stored: tuple[WorkDir, pa.Table], k: Any) -> None:
    _, table = stored
    with pytest.raises(InputError, match="even integer"):
        plan_full_grid(table, k)
    with pytest.raises(InputError, match="even integer"):
        design_assignments("balanced", k)


@pytest.mark.parametrize("k", [2, 4, 6])
@pytest.mark.parametrize("design", DESIGNS)
def test_every_condition_has_marginal_one_half(design: str, k: int) -> None:
    assignments = design_assignments(design, k)
    expected = {"common": 2, "independent": 2**k, "balanced": math.comb(k, k // 2)}[design]
    assert len(assignments) == expected
    assert len(set(assignments)) == expected
    assert all(len(a) == k and set(a) <= {"AB", "BA"} for a in assignments)
    for seed in range(k):
        for order in ("AB", "BA"):
            hits = sum(1 for a in assignments if a[seed] == order)
            assert 2 * hits == len(assignments), (design, k, seed, order)
    if design == "common":
        assert all(len(set(a)) == 1 for a in assignments)
    if design == "balanced":
        assert all(a.count("AB") == k // 2 for a in assignments)


def test_design_enumeration_rejects_full_and_unknown() -> None:
    for design in ("full", "random"):
        with pytest.raises(InputError, match="unknown design"):
            design_assignments(design, 4)


def _orders(table: pa.Table) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for r in table.to_pylist():
        out.setdefault(r["pair_id"], []).append((r["seed"], r["order"]))
    return {p: tuple(o for _, o in sorted(v)) for p, v in out.items()}


@pytest.mark.parametrize("design", DESIGNS)
def test_draws_are_reproducible_and_lie_in_the_design(work: WorkDir, design: str) -> None:
    table = manifest(work, 60)
    k = 4
    first = draw_design(table, k, design, rng_seed=11)
    assert first.equals(draw_design(table, k, design, rng_seed=11))
    other = draw_design(table, k, design, rng_seed=12)
    assert _orders(first) != _orders(other)
    assert first.num_rows == 60 * k
    allowed = set(design_assignments(design, k))
    assert set(_orders(first).values()) <= allowed
    # A pair's draw depends on the seed and its id only, not on the rest of the manifest.
    smaller = manifest(work, 20)
    assert smaller.column("manifest_hash")[0] != table.column("manifest_hash")[0]
    small_orders = _orders(draw_design(smaller, k, design, rng_seed=11))
    assert small_orders == {p: o for p, o in _orders(first).items() if p in small_orders}


def test_balanced_draws_cover_all_assignments_evenly(work: WorkDir) -> None:
    table = manifest(work, 600)
    counts = Counter(_orders(draw_design(table, 4, "balanced", rng_seed=3)).values())
    assert set(counts) == set(design_assignments("balanced", 4))
    # Each of the 6 assignments expects 100 of 600 (sd about 9).
    assert all(60 <= c <= 140 for c in counts.values()), counts


def test_write_read_and_list_plans(work: WorkDir) -> None:
    table = manifest(work, 4)
    info, grid = make_plan(table, 2, "full", None)
    assert info.presentations == 16 and info.pairs == 4 and info.rng_seed is None
    written = write_plan(work, info, grid)
    assert written == info
    again = write_plan(work, *make_plan(table, 2, "full", None))
    assert again.plan_id == info.plan_id and again.created_at == info.created_at
    read_info, read_table = read_plan(work, info.plan_id)
    assert read_info == info
    assert read_table.equals(grid)
    drawn_info, drawn = make_plan(table, 2, "common", 5)
    write_plan(work, drawn_info, drawn)
    assert {p.plan_id for p in list_plans(work)} == {info.plan_id, drawn_info.plan_id}
    assert resolve_plan_id(work, info.plan_id[:10]) == info.plan_id


@pytest.mark.parametrize(
    ("design", "rng_seed", "message"),
    [
        ("full", 3, "draws nothing"),
        ("balanced", None, "needs an rng seed"),
        ("balanced", -1, "non-negative"),
        ("shuffled", 1, "unknown design"),
    ],
)
def test_bad_plan_requests(
    stored: tuple[WorkDir, pa.Table], design: str, rng_seed: int | None, message: str
) -> None:
    _, table = stored
    with pytest.raises(InputError, match=message):
        make_plan(table, 4, design, rng_seed)


def _set(table: pa.Table, column: str, row: int, value: Any) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.column_names.index(column)
    return table.set_column(index, table.schema.field(index), pa.array(values))


def test_tampered_identity_in_a_stored_plan_is_rejected_naming_the_presentation(
    work: WorkDir,
) -> None:
    table = manifest(work, 3)
    info = write_plan(work, *make_plan(table, 4, "full", None))
    path = work.plan_dir(info.plan_id) / PLAN_FILE
    stored = pq.read_table(path)
    row = stored.column("order").to_pylist().index("BA")
    target = stored.column("presentation_id")[row].as_py()
    pq.write_table(_set(stored, "left_identity", row, "A"), path)

    with pytest.raises(GateError) as exc:
        read_plan(work, info.plan_id)
    message = str(exc.value)
    assert "identities agree with the order" in message
    assert target in message
    # Writing the same plan again must not overwrite the tampered one.
    with pytest.raises(IntegrityError, match="will not be overwritten"):
        write_plan(work, *make_plan(table, 4, "full", None))


def test_plan_for_a_missing_manifest_is_rejected(work: WorkDir, tmp_path: Any) -> None:
    table = manifest(work, 3)
    info, grid = make_plan(table, 2, "full", None)
    elsewhere = WorkDir(tmp_path / "elsewhere")
    with pytest.raises(GateError, match=info.manifest_hash):
        gate_plan(info, grid, elsewhere)
    with pytest.raises(GateError, match="no manifest"):
        write_plan(elsewhere, info, grid)
    assert not (elsewhere.root / "plans" / info.plan_id).exists()


@pytest.mark.parametrize("design", ["full", *DESIGNS])
def test_intact_plans_pass_the_gate(stored: tuple[WorkDir, pa.Table], design: str) -> None:
    work, table = stored
    info, plan = make_plan(table, 4, design, None if design == "full" else 9)
    gate_plan(info, plan, work)


@pytest.mark.parametrize(
    ("design", "mutate", "says"),
    [
        ("full", lambda t: t.slice(1), "exactly 8 presentations"),
        ("full", lambda t: _set(t, "presentation_id", 2, "0" * 64), "presentation_id equals"),
        ("full", lambda t: _set(t, "seed", 0, 4), "seed is in 0..3"),
        ("full", lambda t: _set(t, "plan_id", 5, "f" * 64), "plan_id equals the sidecar"),
        ("full", lambda t: _set(t, "pair_id", 0, "ghost"), "is in manifest"),
        ("common", lambda t: _set(_set(t, "order", 0, "BA"), "left_identity", 0, "B"), "common"),
        ("balanced", lambda t: _set(t, "seed", 1, 0), "(seed) is planned once"),
        ("independent", lambda t: _flip(t, 0), "draw from rng seed 9"),
        ("balanced", lambda t: _flip(t, 0), "balanced assignment"),
    ],
)
def test_gate_names_what_is_broken(
    stored: tuple[WorkDir, pa.Table], design: str, mutate: Any, says: str
) -> None:
    work, table = stored
    info, plan = make_plan(table, 4, design, None if design == "full" else 9)
    with pytest.raises(GateError) as exc:
        gate_plan(info, mutate(plan), work)
    assert says in str(exc.value)


def _flip(table: pa.Table, row: int) -> pa.Table:
    """Swap one presentation's order consistently (identities and id follow), as a
    re-drawn plan would: only the design and draw checks can see it."""
    r = table.slice(row, 1).to_pylist()[0]
    order = "BA" if r["order"] == "AB" else "AB"
    left, right = ("A", "B") if order == "AB" else ("B", "A")
    table = _set(table, "order", row, order)
    table = _set(table, "left_identity", row, left)
    table = _set(table, "right_identity", row, right)
    new_id = digest(r["manifest_hash"], r["pair_id"], r["seed"], order)
    return _set(table, "presentation_id", row, new_id)
