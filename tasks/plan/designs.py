"""Order plans: the full 2K grid or one drawn design per pair, with their ids."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from typing import Any, cast

import numpy as np
import pyarrow as pa

from schemas import PlanInfo, PresentationRow, rows_to_table
from schemas.vocabulary import (
    DESIGNS,
    LEFT_IDENTITY,
    MAX_K,
    ORDERS,
    PLAN_DESIGNS,
    RIGHT_IDENTITY,
    Order,
)
from tasks.errors import InputError, IntegrityError
from tasks.hashing import digest, sha256_text


def check_k(k: Any) -> int:
    """K must be an even integer from 2 to MAX_K (docs/design.md#vocabulary)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 2 or k % 2 or k > MAX_K:
        raise InputError(
            f"K must be an even integer from 2 to {MAX_K} (the replay's exact tables are built "
            f"and tested up to {MAX_K}), got {k!r}"
        )
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


def plan_full_grid(manifest_table: pa.Table, k: int, *, imported: bool = False) -> pa.Table:
    """Every (pair, seed 0..K-1, order AB/BA): 2K presentations per pair.

    `imported`: the grid of judgments made elsewhere (`tasks.imports`), one seed per file,
    where K is what the files hold (1 or more, odd included); the replay needs even K.
    """
    if not imported or isinstance(k, bool) or not isinstance(k, int) or k < 1:
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


def pair_rng(rng_seed: int, pair_id: str) -> np.random.Generator:
    """One generator per pair, derived from the recorded seed and the pair id, so a pair's
    draw does not depend on which other pairs the manifest holds or their order."""
    word = int(sha256_text(pair_id)[:32], 16)
    return np.random.default_rng(np.random.SeedSequence([rng_seed, word]))


def draw_orders(design: str, k: int, rng: np.random.Generator) -> tuple[Order, ...]:
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
        orders = draw_orders(design, k, pair_rng(rng_seed, pair_id))
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
