"""The journal of provider batches: what was submitted, written before it is submitted.

One JSON file per batch under `cache/batches/`: its local id, judge, endpoint, model and call
keys, written (fsynced, atomically) before the batch goes out, then again with the
provider's batch id once it is accepted, and marked `done` once its results are stored. A
run that finds an entry not `done` covering calls it wants polls that batch instead of
submitting them again: a killed run resumes by polling the batches it already paid for.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from tasks.errors import IntegrityError
from tasks.storage import write_json_atomic
from tasks.store.workdir import WorkDir

__all__ = ["BatchEntry", "BatchJournal", "EntryState"]

EntryState = Literal["submitting", "submitted", "done", "abandoned"]
"""`submitting`: written, not yet accepted (or the process died in between); `submitted`:
the provider holds it (`batch_id`); `done`: its results are stored; `abandoned`: never
accepted (its calls are free to go in another batch)."""


@dataclass
class BatchEntry:
    """One provider batch of one judge endpoint and model."""

    local_id: str
    judge: str
    provider: str
    endpoint: str
    model: str
    call_keys: list[str]
    created_at: str
    state: EntryState = "submitting"
    batch_id: str | None = None
    history: list[str] = field(default_factory=list)

    def serves(self, provider: str, endpoint: str, model: str) -> bool:
        """Whether this batch's replies are replies of that judge's calls."""
        return (self.provider, self.endpoint, self.model) == (provider, endpoint, model)


class BatchJournal:
    """The batch entries of a work directory (`cache/batches/*.json`)."""

    def __init__(self, work: WorkDir) -> None:
        self.work = work
        self.folder = work.root / "cache" / "batches"
        self.folder.mkdir(parents=True, exist_ok=True)

    def _path(self, local_id: str) -> Path:
        return self.folder / f"{local_id}.json"

    def new(self, judge: str, provider: str, endpoint: str, model: str,
            call_keys: list[str]) -> BatchEntry:  # fmt: skip
        """A `submitting` entry, written before anything is sent."""
        now = dt.datetime.now(dt.UTC).isoformat()
        entry = BatchEntry(
            local_id=f"jl-{uuid.uuid4().hex}",
            judge=judge,
            provider=provider,
            endpoint=endpoint,
            model=model,
            call_keys=list(call_keys),
            created_at=now,
        )
        self.write(entry)
        return entry

    def write(self, entry: BatchEntry) -> None:
        """Store the entry (atomically, fsynced); its history gains the new state."""
        stamp = dt.datetime.now(dt.UTC).isoformat()
        entry.history.append(f"{stamp} {entry.state}")
        write_json_atomic(asdict(entry), self._path(entry.local_id), overwrite=True)

    def open_entries(self) -> list[BatchEntry]:
        """Entries not `done` nor `abandoned`, oldest first."""
        out = []
        for path in sorted(self.work.fresh("cache", "batches").glob("jl-*.json")):
            try:
                data = json.loads(path.read_text("utf-8"))
                if "remote_id" in data:  # the name an earlier judgeline wrote
                    data["batch_id"] = data.pop("remote_id")
                entry = BatchEntry(**data)
            except (ValueError, TypeError) as exc:
                raise IntegrityError(
                    f"batch journal {path} is damaged ({exc}); look up the provider batch it "
                    "names, then move the file aside"
                ) from None
            if entry.state in ("submitting", "submitted"):
                out.append(entry)
        return sorted(out, key=lambda e: e.created_at)
