"""Ingest: benchmark files and tables into pairs, and pairs into a frozen manifest.

`loaders` reads JudgeBench, RM-Bench, the demo benchmark and generic tables (`tables`,
with `--map`), sharing file readers and field checks (`fields`); `validation` checks pairs
before they are frozen; `manifest` hashes their exact bytes, stores them once and gates
every read; `sources` runs the whole freeze job from source dicts.
"""

from tasks.ingest.demo_benchmark import DEMO_DATASET, demo_pairs
from tasks.ingest.fields import (
    TOO_DEEP,
    LoadedPairs,
    check_unicode,
    identity_key,
    iter_jsonl,
    json_value,
    read_bytes,
    required_text,
    shorten,
    text_field,
    type_name,
)
from tasks.ingest.loaders import (
    KINDS,
    load_judgebench,
    load_rmbench,
    load_source,
    read_judgebench,
    read_rmbench,
    read_source,
)
from tasks.ingest.manifest import (
    MANIFEST_FILE,
    MANIFEST_INFO_FILE,
    FrozenManifest,
    SourcePairs,
    freeze_manifest,
    gate_manifest,
    list_manifests,
    manifest_hash_of,
    read_manifest,
    resolve_manifest_hash,
)
from tasks.ingest.sources import SOURCE_KEYS, freeze_sources, load_source_dict, source_label
from tasks.ingest.tables import ColumnMapping, load_table, read_table
from tasks.ingest.validation import validate_sources

__all__ = [
    "ColumnMapping",
    "DEMO_DATASET",
    "FrozenManifest",
    "KINDS",
    "LoadedPairs",
    "MANIFEST_FILE",
    "MANIFEST_INFO_FILE",
    "SOURCE_KEYS",
    "SourcePairs",
    "TOO_DEEP",
    "check_unicode",
    "demo_pairs",
    "freeze_manifest",
    "freeze_sources",
    "gate_manifest",
    "identity_key",
    "iter_jsonl",
    "json_value",
    "list_manifests",
    "load_judgebench",
    "load_rmbench",
    "load_source",
    "load_source_dict",
    "load_table",
    "manifest_hash_of",
    "read_bytes",
    "read_judgebench",
    "read_manifest",
    "read_rmbench",
    "read_source",
    "read_table",
    "required_text",
    "resolve_manifest_hash",
    "shorten",
    "source_label",
    "text_field",
    "type_name",
    "validate_sources",
]
