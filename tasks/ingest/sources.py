"""Source dicts (kind, path, mapping, dataset) frozen into a manifest: the freeze job as one
plain function, shared by the `freeze` command and the freeze-manifest flow's tasks."""

from __future__ import annotations

from typing import Any

from tasks.errors import InputError
from tasks.ingest.fields import LoadedPairs
from tasks.ingest.loaders import read_source
from tasks.ingest.manifest import FrozenManifest, SourcePairs, freeze_manifest, read_manifest
from tasks.store.workdir import WorkDir

__all__ = ["SOURCE_KEYS", "freeze_sources", "load_source_dict", "source_label"]

SOURCE_KEYS = frozenset({"kind", "path", "mapping", "dataset", "baseline", "pairs"})


def source_label(source: dict[str, Any]) -> str:
    """How a source is named in the manifest and in errors: its file, or its generator."""
    return str(source.get("path") or source.get("kind"))


def load_source_dict(source: dict[str, Any]) -> LoadedPairs:
    """Load one source's pairs, with the file row of each, through the dataset loaders."""
    unknown = set(source) - SOURCE_KEYS
    if unknown or "kind" not in source:
        raise InputError(
            "a source is a dict with kind, path, mapping, dataset, baseline, pairs; got keys "
            f"{sorted(source)}"
        )
    return read_source(
        source["kind"],
        source.get("path"),
        mapping=source.get("mapping"),
        dataset=source.get("dataset"),
        baseline=source.get("baseline"),
        pairs=source.get("pairs"),
    )


def freeze_sources(sources: list[dict[str, Any]], work: WorkDir) -> FrozenManifest:
    """Load every source, freeze their pairs as one manifest and read it back gated."""
    if not sources:
        raise InputError("no sources to freeze: give at least one")
    loaded = [_source_pairs(source) for source in sources]
    frozen = freeze_manifest(loaded, work)
    del loaded  # in the manifest now: not held while it is read back
    read_manifest(work, frozen.info.manifest_hash)
    return frozen


def _source_pairs(source: dict[str, Any]) -> SourcePairs:
    read = load_source_dict(source)
    return source_label(source), read.pairs, read.rows
