"""Order plans: the full 2K grid or one drawn design per pair, stored once as the trusted map."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import os
import re
import shutil
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas import PlanInfo, PresentationRow, conform, rows_to_table
from schemas.vocabulary import DESIGNS, LEFT_IDENTITY, ORDERS, PLAN_DESIGNS, RIGHT_IDENTITY, Order
from tasks.errors import GateError, InputError, IntegrityError
from tasks.gates import Check, gate_once, run_gate
from tasks.hashing import digest, sha256_text
from tasks.ingest.manifest import MANIFEST_FILE, MANIFEST_INFO_FILE, read_manifest
from tasks.storage import read_stored_folder, write_json_atomic, write_parquet_atomic
from tasks.workdir import WorkDir

__all__ = [
    "PLAN_FILE",
    "PLAN_INFO_FILE",
    "check_design",
    "check_k",
    "check_plan_request",
    "design_assignments",
    "draw_design",
    "gate_plan",
    "list_plans",
    "make_plan",
    "plan_full_grid",
    "plan_id_of",
    "presentation_id_of",
    "read_plan",
    "resolve_plan_id",
    "write_plan",
]

PLAN_FILE = "presentations.parquet"
PLAN_INFO_FILE = "plan.json"
_ID = re.compile(r"[0-9a-f]{64}")


def check_k(k: Any) -> int:
    """K must be an even integer >= 2 (SPEC section 1)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 2 or k % 2:
        raise InputError(f"K must be an even integer >= 2, got {k!r}")
    return k


def check_design(design: str, allowed: tuple[str, ...]) -> str:
    if design not in allowed:
        raise InputError(f"unknown design {design!r}; expected one of {', '.join(allowed)}")
    return design


def plan_id_of(manifest_hash: str, k: int, design: str, rng_seed: int | None) -> str:
    """The plan's id: what fully decides its presentations."""
    return digest(manifest_hash, k, design, rng_seed)


def presentation_id_of(manifest_hash: str, pair_id: str, seed: int, order: str) -> str:
    """A presentation's id: the same (pair, seed, order) has one id in every plan of a manifest."""
    return digest(manifest_hash, pair_id, seed, order)


def _manifest_of(manifest_table: pa.Table) -> tuple[str, list[str]]:
    hashes = set(manifest_table.column("manifest_hash").to_pylist())
    if len(hashes) != 1:
        raise IntegrityError(f"a manifest table must hold one manifest hash, found {len(hashes)}")
    pair_ids = sorted(manifest_table.column("pair_id").to_pylist())
    return str(hashes.pop()), pair_ids


def _presentations(manifest_hash: str, plan_id: str, cells: list[tuple[str, int, str]]) -> pa.Table:
    rows = [
        {
            "presentation_id": presentation_id_of(manifest_hash, pair_id, seed, order),
            "plan_id": plan_id,
            "manifest_hash": manifest_hash,
            "pair_id": pair_id,
            "seed": seed,
            "order": order,
            "left_identity": LEFT_IDENTITY[order],
            "right_identity": RIGHT_IDENTITY[order],
        }
        for pair_id, seed, order in cells
    ]
    return rows_to_table(rows, PresentationRow)


def plan_full_grid(manifest_table: pa.Table, k: int) -> pa.Table:
    """Every (pair, seed 0..K-1, order AB/BA): 2K presentations per pair."""
    check_k(k)
    manifest_hash, pair_ids = _manifest_of(manifest_table)
    plan_id = plan_id_of(manifest_hash, k, "full", None)
    cells = [(p, s, o) for p in pair_ids for s in range(k) for o in ORDERS]
    return _presentations(manifest_hash, plan_id, cells)


def design_assignments(design: str, k: int) -> list[tuple[Order, ...]]:
    """The design's equally likely assignments of an order to each seed, enumerated exactly:
    2 for `common`, 2^K for `independent`, C(K, K/2) for `balanced`."""
    check_k(k)
    check_design(design, DESIGNS)
    if design == "common":
        return [cast(tuple[Order, ...], (o,) * k) for o in ORDERS]
    if design == "independent":
        return [cast(tuple[Order, ...], a) for a in itertools.product(ORDERS, repeat=k)]
    out: list[tuple[Order, ...]] = []
    for ab_seeds in itertools.combinations(range(k), k // 2):
        out.append(tuple("AB" if s in ab_seeds else "BA" for s in range(k)))
    assert len(out) == math.comb(k, k // 2)
    return out


def _pair_rng(rng_seed: int, pair_id: str) -> np.random.Generator:
    """One generator per pair, derived from the recorded seed and the pair id, so a pair's
    draw does not depend on which other pairs the manifest holds or their order."""
    word = int(sha256_text(pair_id)[:32], 16)
    return np.random.default_rng(np.random.SeedSequence([rng_seed, word]))


def _draw(design: str, k: int, rng: np.random.Generator) -> tuple[Order, ...]:
    """One assignment, uniform over design_assignments(design, k) (0 is AB, 1 is BA)."""
    if design == "common":
        bits = [int(rng.integers(2))] * k
    elif design == "independent":
        bits = [int(b) for b in rng.integers(2, size=k)]
    else:
        # A uniform permutation of K/2 zeros and K/2 ones is uniform over the C(K, K/2)
        # distinct arrangements: each arises from the same number of permutations.
        bits = [int(b) for b in rng.permutation([0] * (k // 2) + [1] * (k // 2))]
    return tuple(ORDERS[b] for b in bits)


def _check_rng_seed(rng_seed: Any) -> int:
    if isinstance(rng_seed, bool) or not isinstance(rng_seed, int) or rng_seed < 0:
        raise InputError(f"the rng seed must be a non-negative integer, got {rng_seed!r}")
    return rng_seed


def draw_design(manifest_table: pa.Table, k: int, design: str, rng_seed: int) -> pa.Table:
    """K presentations per pair, one order per seed, drawn under `design` from `rng_seed`."""
    check_k(k)
    check_design(design, DESIGNS)
    _check_rng_seed(rng_seed)
    manifest_hash, pair_ids = _manifest_of(manifest_table)
    plan_id = plan_id_of(manifest_hash, k, design, rng_seed)
    cells: list[tuple[str, int, str]] = []
    for pair_id in pair_ids:
        orders = _draw(design, k, _pair_rng(rng_seed, pair_id))
        cells.extend((pair_id, seed, order) for seed, order in enumerate(orders))
    return _presentations(manifest_hash, plan_id, cells)


def check_plan_request(k: Any, design: str, rng_seed: Any) -> None:
    """Reject a plan request before any work: K, design, and an rng seed iff a design."""
    check_k(k)
    check_design(design, PLAN_DESIGNS)
    if design == "full":
        if rng_seed is not None:
            raise InputError("the full grid draws nothing: do not give an rng seed with it")
    elif rng_seed is None:
        raise InputError(f"design {design!r} needs an rng seed")
    else:
        _check_rng_seed(rng_seed)


def make_plan(
    manifest_table: pa.Table, k: int, design: str, rng_seed: int | None
) -> tuple[PlanInfo, pa.Table]:
    """Build a plan and its sidecar: the full grid (no rng seed) or one drawn design."""
    check_plan_request(k, design, rng_seed)
    if design == "full":
        table = plan_full_grid(manifest_table, k)
    else:
        assert rng_seed is not None
        table = draw_design(manifest_table, k, design, rng_seed)
    manifest_hash, pair_ids = _manifest_of(manifest_table)
    info = PlanInfo(
        plan_id=plan_id_of(manifest_hash, k, design, rng_seed),
        manifest_hash=manifest_hash,
        k=k,
        design=cast(Any, design),
        rng_seed=rng_seed,
        pairs=len(pair_ids),
        presentations=table.num_rows,
        created_at=dt.datetime.now(dt.UTC),
    )
    return info, table


# --- gate -----------------------------------------------------------------------------


def _expected_orders(info: PlanInfo, pair_ids: list[str]) -> dict[tuple[str, int], str]:
    if info.design == "full" or info.rng_seed is None or info.rng_seed < 0:
        return {}
    out: dict[tuple[str, int], str] = {}
    for pair_id in pair_ids:
        for seed, order in enumerate(_draw(info.design, info.k, _pair_rng(info.rng_seed, pair_id))):
            out[(pair_id, seed)] = order
    return out


def gate_plan(info: PlanInfo, table: pa.Table, work: WorkDir) -> None:
    """The plan's data-quality gate; raises GateError naming offending presentations.

    The manifest must be stored (and pass its own gate); every manifest pair must have
    exactly its planned conditions; identities must agree with the order; ids must equal
    their recomputed digests; plan_id and manifest_hash columns must equal the sidecar's.
    """
    import great_expectations as gx

    failures: list[str] = []
    k, design = info.k, info.design
    if info.plan_id != plan_id_of(info.manifest_hash, k, design, info.rng_seed):
        failures.append(
            f"sidecar plan_id {info.plan_id} is not the digest of its manifest hash, K, "
            "design and rng seed"
        )
    manifest_pairs: set[str] | None = None
    try:
        # The manifest's own gate runs when a stage reads it to build or use a plan; here
        # it must exist, be readable and be the one the sidecar names.
        _, manifest = read_manifest(work, info.manifest_hash, gate=False)
        manifest_pairs = set(manifest.column("pair_id").to_pylist())
    except (InputError, IntegrityError, GateError) as exc:
        failures.append(f"plan {info.plan_id} points to manifest {info.manifest_hash}: {exc}")

    rows = table.to_pylist()
    per_pair = k if design != "full" else 2 * k
    counts = Counter(r["pair_id"] for r in rows)
    ab_counts = Counter(r["pair_id"] for r in rows if r["order"] == "AB")
    if manifest_pairs is not None:
        absent = sorted(manifest_pairs - set(counts))
        if absent:
            failures.append(
                f"every manifest pair is planned ({len(absent)} pairs have no presentation; "
                f"pair_id {', '.join(absent[:5])})"
            )
    if info.pairs != len(counts) or info.presentations != len(rows):
        failures.append(
            f"sidecar counts ({info.pairs} pairs, {info.presentations} presentations) equal "
            f"the table's ({len(counts)} pairs, {len(rows)} presentations)"
        )
    expected = _expected_orders(info, sorted(counts))

    def design_ok(r: dict[str, Any]) -> bool:
        if design == "common":
            return ab_counts[r["pair_id"]] in (0, k)
        if design == "balanced":
            return ab_counts[r["pair_id"]] == k // 2
        return True  # the full grid and `independent` constrain nothing beyond the counts

    df = pd.DataFrame(
        {
            "presentation": [
                f"{r['presentation_id']} (pair {r['pair_id']}, seed {r['seed']}, {r['order']})"
                for r in rows
            ],
            "presentation_id": [r["presentation_id"] for r in rows],
            "pair_id": [r["pair_id"] for r in rows],
            "seed": [r["seed"] for r in rows],
            "order": [r["order"] for r in rows],
            "plan_id": [r["plan_id"] for r in rows],
            "manifest_hash": [r["manifest_hash"] for r in rows],
            "known_pair": [manifest_pairs is None or r["pair_id"] in manifest_pairs for r in rows],
            "pair_count_ok": [counts[r["pair_id"]] == per_pair for r in rows],
            "identities_ok": [
                r["left_identity"] == LEFT_IDENTITY.get(r["order"])
                and r["right_identity"] == RIGHT_IDENTITY.get(r["order"])
                for r in rows
            ],
            "presentation_id_ok": [
                r["presentation_id"]
                == presentation_id_of(r["manifest_hash"], r["pair_id"], r["seed"], r["order"])
                for r in rows
            ],
            "design_ok": [design_ok(r) for r in rows],
            "draw_ok": [
                not expected or expected.get((r["pair_id"], r["seed"])) == r["order"] for r in rows
            ],
        },
        dtype=object,
    )
    expect = gx.expectations
    condition = ["pair_id", "seed", "order"] if design == "full" else ["pair_id", "seed"]

    def true(column: str, says: str) -> Check:
        return Check(expect.ExpectColumnValuesToBeInSet(column=column, value_set=[True]), says)

    checks = [
        Check(
            expect.ExpectColumnValuesToBeUnique(column="presentation_id"),
            "presentation ids are unique",
        ),
        Check(
            expect.ExpectColumnValuesToBeInSet(column="plan_id", value_set=[info.plan_id]),
            f"plan_id equals the sidecar's {info.plan_id}",
        ),
        Check(
            expect.ExpectColumnValuesToBeInSet(
                column="manifest_hash", value_set=[info.manifest_hash]
            ),
            f"manifest_hash equals the sidecar's {info.manifest_hash}",
        ),
        Check(
            expect.ExpectColumnValuesToBeInSet(column="order", value_set=list(ORDERS)),
            "order is AB or BA",
        ),
        Check(
            expect.ExpectColumnValuesToBeBetween(column="seed", min_value=0, max_value=k - 1),
            f"seed is in 0..{k - 1}",
        ),
        Check(
            expect.ExpectCompoundColumnsToBeUnique(column_list=condition),
            f"each ({', '.join(condition[1:])}) is planned once per pair",
        ),
        true("known_pair", f"the pair is in manifest {info.manifest_hash}"),
        true("pair_count_ok", f"each pair has exactly {per_pair} presentations"),
        true("identities_ok", "left/right identities agree with the order (AB: A left)"),
        true("presentation_id_ok", "presentation_id equals digest(manifest, pair, seed, order)"),
        true("design_ok", f"each pair's orders form a {design} assignment"),
        true("draw_ok", f"orders equal the {design} draw from rng seed {info.rng_seed}"),
    ]
    try:
        run_gate(f"plan {info.plan_id}", df, checks, id_column="presentation")
    except GateError as exc:
        failures.extend(exc.failures)
    if failures:
        raise GateError(f"plan {info.plan_id}", failures)


# --- storage --------------------------------------------------------------------------


def _read_dir(folder: Path, name: str) -> tuple[PlanInfo, pa.Table]:
    """Read one stored plan folder without gating it; IntegrityError if unreadable."""
    return read_stored_folder(
        folder,
        kind="plan",
        name=name,
        info_file=PLAN_INFO_FILE,
        info_model=PlanInfo,
        id_field="plan_id",
        table_file=PLAN_FILE,
        row_model=PresentationRow,
    )


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([("pair_id", "ascending"), ("seed", "ascending"), ("order", "ascending")])


def _verify_existing(work: WorkDir, info: PlanInfo, table: pa.Table) -> PlanInfo:
    """A stored plan with this id must pass its gate and hold exactly these presentations."""
    stored_info, stored = _read_dir(work.plan_dir(info.plan_id), info.plan_id)
    try:
        gate_plan(stored_info, stored, work)
    except GateError as exc:
        raise IntegrityError(
            f"plan {info.plan_id}: the stored plan fails its gate and will not be overwritten.\n"
            f"{exc}"
        ) from exc
    if not _sorted(stored).equals(_sorted(table)):
        raise IntegrityError(f"plan {info.plan_id}: the stored presentations differ from a redraw")
    return stored_info


def write_plan(work: WorkDir, info: PlanInfo, table: pa.Table) -> PlanInfo:
    """Gate and store a plan once (atomic); if it is already stored, verify and return it."""
    table = conform(table, PresentationRow, where=f"plan {info.plan_id}")
    final = work.plan_dir(info.plan_id)
    if final.exists():
        return _verify_existing(work, info, table)
    staging = work.plans / f".staging-{info.plan_id[:16]}-{uuid.uuid4().hex}"
    try:
        write_parquet_atomic(table, staging / PLAN_FILE)
        write_json_atomic(info.model_dump(mode="json"), staging / PLAN_INFO_FILE)
        stored_info, stored = _read_dir(staging, info.plan_id)
        gate_plan(stored_info, stored, work)
        try:
            os.rename(staging, final)
        except OSError:
            if not (final / PLAN_FILE).exists():
                raise
            return _verify_existing(work, info, table)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return info


def resolve_plan_id(work: WorkDir, prefix: str) -> str:
    """The stored plan id that `prefix` names uniquely."""
    prefix = prefix.strip().lower()
    root = work.root / "plans"
    names = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    names = sorted(n for n in names if not n.startswith("."))
    if prefix in names:
        return prefix
    matches = [n for n in names if prefix and n.startswith(prefix)]
    if len(matches) != 1:
        what = "is ambiguous: " + ", ".join(matches) if matches else f"matches no plan in {root}"
        raise InputError(f"plan id {prefix!r} {what}")
    return matches[0]


def read_plan(work: WorkDir, plan_id: str, *, gate: bool = True) -> tuple[PlanInfo, pa.Table]:
    """Read a stored plan, conformed to PresentationRow, and (by default) gate it."""
    if not _ID.fullmatch(plan_id):
        raise InputError(f"{plan_id!r} is not a plan id (64 hex digits)")
    folder = work.root / "plans" / plan_id
    if not folder.is_dir():
        raise InputError(f"no plan {plan_id} in {work.root / 'plans'}")
    info, table = _read_dir(folder, plan_id)
    if gate:
        manifest = work.root / "manifests" / info.manifest_hash
        stored = [folder / PLAN_FILE, folder / PLAN_INFO_FILE]
        stored += [manifest / MANIFEST_FILE, manifest / MANIFEST_INFO_FILE]
        gate_once(work.gate_memos, stored, lambda: gate_plan(info, table, work))
    return info, table


def list_plans(work: WorkDir) -> list[PlanInfo]:
    """The sidecars of every stored plan, oldest first."""
    root = work.root / "plans"
    if not root.is_dir():
        return []
    infos = [
        _read_dir(folder, folder.name)[0]
        for folder in sorted(root.iterdir())
        if folder.is_dir() and not folder.name.startswith(".")
    ]
    return sorted(infos, key=lambda i: (i.created_at, i.plan_id))
