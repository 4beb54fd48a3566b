"""Frozen manifests: validate pairs, hash their exact bytes, store them once, gate every read."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from schemas import MANIFEST_FORMAT, ManifestInfo, ManifestRow, Pair, arrow_schema
from tasks.errors import GateError, InputError, IntegrityError
from tasks.gates import Check, Expect, gate_once, run_gate
from tasks.hashing import canonical_json, sha256_text
from tasks.ingest.validation import SourcePairs, check_sources
from tasks.storage import publish_folder_once, published_folders, read_stored_folder
from tasks.store.workdir import WorkDir

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_INFO_FILE",
    "FrozenManifest",
    "PairColumns",
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
_CHUNK = 20_000
"""Rows turned into Python objects at a time while a manifest is hashed into its table or
gated (the whole of a 750,000-pair manifest as dicts took a gigabyte)."""


@dataclass(frozen=True)
class FrozenManifest:
    """What freezing produced: the stored sidecar, where it lives and what to warn about."""

    info: ManifestInfo
    path: Path
    already_frozen: bool
    warnings: list[str] = field(default_factory=list)


# --- canonical form -------------------------------------------------------------------


def manifest_hash_of(rows: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 of the canonical serialisation of pair rows (Pair dicts or ManifestRow dicts):
    the format line, then one canonical JSON line per pair holding exactly the Pair fields,
    sorted by pair id."""
    return _streamed_hash(sorted(rows, key=lambda row: row["pair_id"]))


def _streamed_hash(rows: Iterable[Mapping[str, Any]]) -> str:
    """`manifest_hash_of` rows already sorted by pair id, without holding the whole text."""
    digest = hashlib.sha256((MANIFEST_FORMAT + "\n").encode("utf-8"))
    for row in rows:
        digest.update((canonical_json({f: row[f] for f in _PAIR_FIELDS}) + "\n").encode("utf-8"))
    return digest.hexdigest()


# --- building and gating --------------------------------------------------------------


class PairColumns:
    """Pairs kept as one list per Pair field, in the order they came: what a manifest is
    built from. A pydantic pair costs about a kilobyte beyond its strings; a freeze of a
    million answers made 750,000 of them."""

    def __init__(self) -> None:
        self.values: dict[str, list[Any]] = {f: [] for f in _PAIR_FIELDS}

    @classmethod
    def of(cls, pairs: Iterable[Pair]) -> PairColumns:
        columns = cls()
        for pair in pairs:
            columns.append(pair)
        return columns

    def __len__(self) -> int:
        return len(self.values["pair_id"])

    def append(self, pair: Pair) -> None:
        for name, values in self.values.items():
            values.append(getattr(pair, name))


def _sorted(columns: PairColumns) -> dict[str, list[Any]]:
    """The columns' values in pair id order (the manifest's order)."""
    ids = columns.values["pair_id"]
    order = sorted(range(len(ids)), key=ids.__getitem__)
    return {f: [v[i] for i in order] for f, v in columns.values.items()}


def _hash_of(values: dict[str, list[Any]]) -> str:
    """The manifest hash of sorted column values (`manifest_hash_of`, streamed)."""
    count = len(values["pair_id"])
    return _streamed_hash({f: values[f][i] for f in _PAIR_FIELDS} for i in range(count))


def _table(values: dict[str, list[Any]], manifest_hash: str) -> pa.Table:
    """The manifest table of sorted column values."""
    schema = arrow_schema(ManifestRow)
    count = len(values["pair_id"])
    arrays: dict[str, Any] = {f: pa.array(values[f], schema.field(f).type) for f in _PAIR_FIELDS}
    arrays["manifest_hash"] = pa.array([manifest_hash] * count, pa.string())
    for side in ("a", "b"):
        texts = values[f"answer_{side}"]
        arrays[f"answer_{side}_sha256"] = pa.chunked_array(
            [
                pa.array([sha256_text(t) for t in texts[start : start + _CHUNK]], pa.string())
                for start in range(0, count, _CHUNK)
            ],
            pa.string(),
        )
    return pa.Table.from_pydict({n: arrays[n] for n in schema.names}, schema=schema)


def build_manifest_table(pairs: Iterable[Pair] | PairColumns) -> tuple[str, pa.Table]:
    """The manifest hash and table of validated pairs, in memory (`freeze_manifest` stores
    them)."""
    values = _sorted(pairs if isinstance(pairs, PairColumns) else PairColumns.of(pairs))
    manifest_hash = _hash_of(values)
    return manifest_hash, _table(values, manifest_hash)


def _hash_or_none(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return sha256_text(value)
    except UnicodeEncodeError:
        return None


def _nonblank(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _recomputed_hash(table: pa.Table) -> str:
    """The manifest hash of the table's rows, recomputed from their fields."""
    try:
        ids = table.column("pair_id").to_pylist()
        order = sorted(range(len(ids)), key=ids.__getitem__)
        del ids
        fields = table.select(list(_PAIR_FIELDS))

        def rows() -> Iterator[dict[str, Any]]:
            for start in range(0, len(order), _CHUNK):
                yield from fields.take(order[start : start + _CHUNK]).to_pylist()

        return _streamed_hash(rows())
    except (KeyError, TypeError, ValueError, UnicodeEncodeError):
        return "<rows cannot be serialised>"


def gate_manifest(table: pa.Table, *, expected_hash: str | None = None) -> None:
    """The manifest's data-quality gate; raises GateError naming offending pairs.

    Checks unique non-null pair ids, non-blank answers, stored SHA-256 against the stored
    bytes, keys in {A, B, null}, and the manifest hash recomputed from the rows against the
    stored column (and against `expected_hash`, the folder name, when given).
    """
    recomputed = _recomputed_hash(table)
    checked: dict[str, list[bool]] = {
        name: []
        for name in ("answer_a_nonblank", "answer_b_nonblank", "answer_a_sha256_ok",
                     "answer_b_sha256_ok", "manifest_hash_ok", "name_ok")
    }  # fmt: skip
    names = ["answer_a", "answer_b", "answer_a_sha256", "answer_b_sha256", "manifest_hash"]
    for batch in table.select(names).to_batches(max_chunksize=_CHUNK):
        a, b, a_sha, b_sha, stored_hash = (batch.column(n).to_pylist() for n in names)
        checked["answer_a_nonblank"] += map(_nonblank, a)
        checked["answer_b_nonblank"] += map(_nonblank, b)
        for text, sha, name in ((a, a_sha, "answer_a_sha256_ok"), (b, b_sha, "answer_b_sha256_ok")):
            checked[name] += (_hash_or_none(t) == h for t, h in zip(text, sha, strict=True))
        checked["manifest_hash_ok"] += (h == recomputed for h in stored_hash)
        checked["name_ok"] += (expected_hash is None or h == expected_hash for h in stored_hash)
    df = pd.DataFrame(
        {
            "pair_id": table.column("pair_id").to_pylist(),
            "key": table.column("key").to_pylist(),
            **checked,
        },
        dtype=object,
    )
    del checked
    stored = sorted(str(h) for h in pc.unique(table.column("manifest_hash")).to_pylist())
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


def _info(manifest_hash: str, pairs: PairColumns, sources: list[str]) -> ManifestInfo:
    v = pairs.values
    identical = zip(v["pair_id"], v["answer_a"], v["answer_b"], strict=True)
    return ManifestInfo(
        manifest_hash=manifest_hash,
        pairs=len(pairs),
        datasets=dict(sorted(Counter(v["dataset"]).items())),
        keys=dict(sorted(Counter(k or "none" for k in v["key"]).items())),
        sources=list(dict.fromkeys(sources)),
        identical_answer_pairs=sorted(i for i, a, b in identical if a == b),
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
    pairs = PairColumns()
    identical, others = check_sources(sources, pairs.append)
    if len(identical) == 1:
        log.warning(identical[0])
    elif identical:  # one line, not one per pair (an import can hold hundreds)
        log.warning(
            "%d pairs have byte-identical answers A and B (kept), the first at %s; the "
            "manifest's identical_answer_pairs lists them all",
            len(identical),
            identical[0].split(" has byte-identical", 1)[0],
        )
    for warning in others:
        log.warning(warning)
    warnings = identical + others
    values = _sorted(pairs)
    manifest_hash = _hash_of(values)
    info = _info(manifest_hash, pairs, [source[0] for source in sources])
    del pairs  # `values` holds the same objects, in the manifest's order
    final = work.manifest_dir(manifest_hash)

    def table() -> pa.Table:
        # Made as it is written, and dropped (its memory given back) before the staged copy
        # is read back and gated: a large manifest is in memory once.
        made = _table(values, manifest_hash)
        values.clear()
        return made

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
