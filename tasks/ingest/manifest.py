"""Frozen manifests: validate pairs, hash their exact bytes, store them once, gate every read."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from schemas import MANIFEST_FORMAT, ManifestInfo, ManifestRow, Pair, rows_to_table
from tasks.errors import GateError, InputError, IntegrityError
from tasks.gates import Check, Expect, gate_once, run_gate
from tasks.hashing import canonical_json, sha256_text
from tasks.ingest.validation import SourcePairs, validate_sources
from tasks.storage import publish_folder_once, published_folders, read_stored_folder
from tasks.workdir import WorkDir

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_INFO_FILE",
    "FrozenManifest",
    "SourcePairs",
    "build_manifest_table",
    "freeze_manifest",
    "gate_manifest",
    "list_manifests",
    "manifest_hash_of",
    "read_manifest",
    "resolve_manifest_hash",
]

log = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.parquet"
MANIFEST_INFO_FILE = "manifest.json"
_HASH = re.compile(r"[0-9a-f]{64}")
_PAIR_FIELDS = tuple(Pair.model_fields)


@dataclass(frozen=True)
class FrozenManifest:
    """What freezing produced: the stored sidecar, where it lives and what to warn about."""

    info: ManifestInfo
    path: Path
    already_frozen: bool
    warnings: list[str] = field(default_factory=list)


# --- canonical form -------------------------------------------------------------------


def _canonical_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The canonical serialisation: the format line, then one canonical JSON line per pair
    holding exactly the Pair fields, sorted by pair id."""
    ordered = sorted(rows, key=lambda row: row["pair_id"])
    lines = (canonical_json({f: row[f] for f in _PAIR_FIELDS}) + "\n" for row in ordered)
    return MANIFEST_FORMAT + "\n" + "".join(lines)


def manifest_hash_of(rows: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 of the canonical serialisation of pair rows (Pair dicts or ManifestRow dicts)."""
    return sha256_text(_canonical_text(rows))


# --- building and gating --------------------------------------------------------------


def build_manifest_table(pairs: list[Pair]) -> tuple[str, pa.Table]:
    """The manifest hash and table of validated pairs, in memory (`freeze_manifest` stores
    them)."""
    dumped = [p.model_dump() for p in pairs]
    manifest_hash = manifest_hash_of(dumped)
    rows = [
        {
            "manifest_hash": manifest_hash,
            **d,
            "answer_a_sha256": sha256_text(d["answer_a"]),
            "answer_b_sha256": sha256_text(d["answer_b"]),
        }
        for d in sorted(dumped, key=lambda d: d["pair_id"])
    ]
    return manifest_hash, rows_to_table(rows, ManifestRow)


def _hash_or_none(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return sha256_text(value)
    except UnicodeEncodeError:
        return None


def _nonblank(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def gate_manifest(table: pa.Table, *, expected_hash: str | None = None) -> None:
    """The manifest's data-quality gate; raises GateError naming offending pairs.

    Checks unique non-null pair ids, non-blank answers, stored SHA-256 against the stored
    bytes, keys in {A, B, null}, and the manifest hash recomputed from the rows against the
    stored column (and against `expected_hash`, the folder name, when given).
    """

    rows = table.to_pylist()
    try:
        recomputed = manifest_hash_of(rows)
    except (KeyError, TypeError, ValueError, UnicodeEncodeError):
        recomputed = "<rows cannot be serialised>"
    df = pd.DataFrame(
        {
            "pair_id": [r["pair_id"] for r in rows],
            "key": [r["key"] for r in rows],
            "answer_a_nonblank": [_nonblank(r["answer_a"]) for r in rows],
            "answer_b_nonblank": [_nonblank(r["answer_b"]) for r in rows],
            "answer_a_sha256_ok": [
                _hash_or_none(r["answer_a"]) == r["answer_a_sha256"] for r in rows
            ],
            "answer_b_sha256_ok": [
                _hash_or_none(r["answer_b"]) == r["answer_b_sha256"] for r in rows
            ],
            "manifest_hash_ok": [r["manifest_hash"] == recomputed for r in rows],
            "name_ok": [expected_hash is None or r["manifest_hash"] == expected_hash for r in rows],
        },
        dtype=object,
    )
    stored = sorted({str(r["manifest_hash"]) for r in rows})
    checks = [
        Check(Expect("ExpectColumnValuesToNotBeNull", column="pair_id"), "every pair has an id"),
        Check(Expect("ExpectColumnValuesToBeUnique", column="pair_id"), "pair ids are unique"),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="answer_a_nonblank", value_set=[True]),
            "answer A is not empty or whitespace-only",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="answer_b_nonblank", value_set=[True]),
            "answer B is not empty or whitespace-only",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="answer_a_sha256_ok", value_set=[True]),
            "stored answer_a_sha256 equals the SHA-256 of the stored answer A bytes",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="answer_b_sha256_ok", value_set=[True]),
            "stored answer_b_sha256 equals the SHA-256 of the stored answer B bytes",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="key", value_set=["A", "B"]),
            "key is A, B or empty",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="manifest_hash_ok", value_set=[True]),
            f"stored manifest_hash {', '.join(stored) or '-'} equals the hash recomputed "
            f"from the rows ({recomputed})",
        ),
        Check(
            Expect("ExpectColumnValuesToBeInSet", column="name_ok", value_set=[True]),
            f"stored manifest_hash equals the manifest's name {expected_hash}",
        ),
    ]
    run_gate("manifest", df, checks, id_column="pair_id")


def _info(manifest_hash: str, pairs: list[Pair], sources: list[str]) -> ManifestInfo:
    return ManifestInfo(
        manifest_hash=manifest_hash,
        pairs=len(pairs),
        datasets=dict(sorted(Counter(p.dataset for p in pairs).items())),
        keys=dict(sorted(Counter(p.key or "none" for p in pairs).items())),
        sources=list(dict.fromkeys(sources)),
        identical_answer_pairs=sorted(p.pair_id for p in pairs if p.answer_a == p.answer_b),
        created_at=dt.datetime.now(dt.UTC),
    )


# --- storage --------------------------------------------------------------------------


def _read_dir(folder: Path, name: str) -> tuple[ManifestInfo, pa.Table]:
    """Read one stored manifest folder without gating it; IntegrityError if unreadable."""
    return read_stored_folder(
        folder,
        kind="manifest",
        name=name,
        info_file=MANIFEST_INFO_FILE,
        info_model=ManifestInfo,
        id_field="manifest_hash",
        table_file=MANIFEST_FILE,
        row_model=ManifestRow,
    )


def _gate_stored(work: WorkDir, folder: Path, table: pa.Table, manifest_hash: str) -> None:
    """Gate the manifest files in `folder` unless these exact bytes passed already (a staged
    manifest's memo serves its published folder: same file names, same bytes)."""
    stored = [folder / MANIFEST_FILE, folder / MANIFEST_INFO_FILE]
    gate_once(work.gate_memos, stored, lambda: gate_manifest(table, expected_hash=manifest_hash))


def _verify_existing(work: WorkDir, manifest_hash: str) -> ManifestInfo:
    """An existing folder must re-hash to its own name, else nothing may claim that name."""
    folder = work.manifest_dir(manifest_hash)
    info, table = _read_dir(folder, manifest_hash)
    try:
        _gate_stored(work, folder, table, manifest_hash)
    except GateError as exc:
        raise IntegrityError(
            f"manifest {manifest_hash}: the stored manifest in {folder} does not re-hash to its "
            f"name; it was changed on disk and will not be overwritten.\n{exc}"
        ) from exc
    return info


def freeze_manifest(sources: Sequence[SourcePairs], work: WorkDir) -> FrozenManifest:
    """Validate, hash and store pairs as a manifest; a no-op if the same one is stored.

    `sources` holds (source label, pairs[, rows]), e.g. (file path, loaded pairs, the file
    row of each); errors and warnings name a pair's source and row. Nothing is written
    unless every pair is valid. Identical A and B bytes are warned about and kept.
    """
    pairs, warnings = validate_sources(sources)
    if len(warnings) == 1:
        log.warning(warnings[0])
    elif warnings:  # one line, not one per pair (an import can hold hundreds)
        log.warning(
            "%d pairs have byte-identical answers A and B (kept), the first at %s; the "
            "manifest's identical_answer_pairs lists them all",
            len(warnings),
            warnings[0].split(" has byte-identical", 1)[0],
        )
    manifest_hash, table = build_manifest_table(pairs)
    final = work.manifest_dir(manifest_hash)
    info = _info(manifest_hash, pairs, [source[0] for source in sources])

    existing = publish_folder_once(
        final,
        table=table,
        table_file=MANIFEST_FILE,
        info=info,
        info_file=MANIFEST_INFO_FILE,
        check=lambda staged: _gate_stored(
            work, staged, _read_dir(staged, manifest_hash)[1], manifest_hash
        ),
        verify_existing=lambda: _verify_existing(work, manifest_hash),
    )
    if existing is not None:
        return FrozenManifest(existing, final, already_frozen=True, warnings=warnings)
    return FrozenManifest(info, final, already_frozen=False, warnings=warnings)


def resolve_manifest_hash(work: WorkDir, prefix: str) -> str:
    """The stored manifest hash that `prefix` names uniquely (a full hash names itself)."""
    prefix = prefix.strip().lower()
    if not prefix:
        raise InputError("empty manifest hash")
    root = work.fresh("manifests", pattern=f"*/{MANIFEST_INFO_FILE}")
    names = [p.name for p in published_folders(root, MANIFEST_INFO_FILE)]
    if prefix in names:
        return prefix
    matches = [n for n in names if n.startswith(prefix)]
    if not matches:
        raise InputError(f"no manifest {prefix!r} in {root}")
    if len(matches) > 1:
        raise InputError(f"manifest hash prefix {prefix!r} is ambiguous: {', '.join(matches)}")
    return matches[0]


def read_manifest(
    work: WorkDir, manifest_hash: str, *, gate: bool = True
) -> tuple[ManifestInfo, pa.Table]:
    """Read a stored manifest, conformed to ManifestRow, and (by default) gate it."""
    if not _HASH.fullmatch(manifest_hash):
        raise InputError(f"{manifest_hash!r} is not a manifest hash (64 hex digits)")
    folder = work.manifest_dir(manifest_hash)
    if not folder.is_dir():
        raise InputError(f"no manifest {manifest_hash} in {work.location(folder.parent)}")
    info, table = _read_dir(folder, manifest_hash)
    if gate:
        _gate_stored(work, folder, table, manifest_hash)
    if info.pairs != table.num_rows:
        raise IntegrityError(
            f"manifest {manifest_hash}: sidecar says {info.pairs} pairs, table has {table.num_rows}"
        )
    return info, table


def list_manifests(work: WorkDir) -> list[ManifestInfo]:
    """The sidecars of every stored manifest, oldest first."""
    folders = published_folders(work.fresh("manifests"), MANIFEST_INFO_FILE)
    infos = [_read_dir(folder, folder.name)[0] for folder in folders]
    return sorted(infos, key=lambda i: (i.created_at, i.manifest_hash))
