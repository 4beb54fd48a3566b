"""The plan's gate: every pair planned exactly, identities from the order, ids recomputed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
import pyarrow as pa

from schemas import PlanInfo
from schemas.vocabulary import LEFT_IDENTITY, ORDERS, RIGHT_IDENTITY
from tasks.errors import GateError, InputError, IntegrityError
from tasks.gates import Check, Expect, run_gate
from tasks.ingest.manifest import read_manifest
from tasks.plan.designs import (
    draw_orders,
    pair_rng,
    plan_id_of,
    presentation_id_of,
)
from tasks.store.workdir import WorkDir


def _expected_orders(info: PlanInfo, pair_ids: list[str]) -> dict[tuple[str, int], str]:
    if info.design == "full" or info.rng_seed is None or info.rng_seed < 0:
        return {}
    out: dict[tuple[str, int], str] = {}
    for pair_id in pair_ids:
        for seed, order in enumerate(
            draw_orders(info.design, info.k, pair_rng(info.rng_seed, pair_id))
        ):
            out[(pair_id, seed)] = order
    return out


def gate_plan(info: PlanInfo, table: pa.Table, work: WorkDir) -> None:
    """The plan's data-quality gate; raises GateError naming offending presentations.

    The manifest must be stored (and pass its own gate); every manifest pair must have
    exactly its planned conditions; identities must agree with the order; ids must equal
    their recomputed digests; plan_id and manifest_hash columns must equal the sidecar's.
    """

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
    condition = ["pair_id", "seed", "order"] if design == "full" else ["pair_id", "seed"]

    def true(column: str, says: str) -> Check:
        return Check(Expect("ExpectColumnValuesToBeInSet", column=column, value_set=[True]), says)

    checks = [
        Check(
            Expect("ExpectColumnValuesToBeUnique", column="presentation_id"),
            "presentation ids are unique",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="plan_id", value_set=[info.plan_id]),
            f"plan_id equals the sidecar's {info.plan_id}",
        ),
        Check(
            Expect(
                "ExpectColumnValuesToBeInSet",
                column="manifest_hash",
                value_set=[info.manifest_hash],
            ),
            f"manifest_hash equals the sidecar's {info.manifest_hash}",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="order", value_set=list(ORDERS)),
            "order is AB or BA",
        ),
        Check(
            Expect("ExpectColumnValuesToBeBetween", column="seed", min_value=0, max_value=k - 1),
            f"seed is in 0..{k - 1}",
        ),
        Check(
            Expect("ExpectCompoundColumnsToBeUnique", column_list=condition),
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
