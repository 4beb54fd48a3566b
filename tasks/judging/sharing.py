"""The claims a judge process takes on its calls, of the kind its work dir needs: locks on a
local (or shared) disk (`tasks.judging.claims.CallClaims`), or objects created with
conditional writes on an object store (`tasks.judging.store_claims.StoreCallClaims`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from tasks.judging.claims import CallClaims, Claim, StoredKeyView
from tasks.store import provide
from tasks.store.workdir import WorkDir

__all__ = ["Claims", "call_claims"]


class Claims(Protocol):
    """Claims on calls, as `JudgeClient` and `CacheWriter` use them (`CallClaims` on a
    local disk, `tasks.judging.store_claims.StoreCallClaims` on an object store)."""

    view: StoredKeyView
    waited: set[str]

    def take(self, call_key: str) -> Claim:
        """Claim a call before its first attempt: MINE (send it), STORED or BUSY."""
        ...

    async def claim(self, call_key: str) -> Claim:
        """`take` without blocking the event loop."""
        ...

    def publishing(self, name: str) -> None: ...

    def published(self, path: Path | None, stored: list[str], settled: set[str]) -> None: ...

    def release(self, call_keys: Iterable[str]) -> None: ...

    @property
    def held(self) -> int: ...

    def close(self) -> None: ...


def call_claims(work: WorkDir, view: StoredKeyView | None = None, *, run_id: str = "") -> Claims:
    """The claims of this process on the calls of `work` for `run_id`, of the kind its
    store needs."""
    claims: Claims = work.store.made("call claims", work, view, run_id)
    return claims


def _store_claims(work: WorkDir, view: StoredKeyView | None, run_id: str) -> Claims:
    from tasks.judging.store_claims import StoreCallClaims

    return StoreCallClaims(work, view, run_id=run_id)


provide(
    "call claims",
    local=lambda work, view, run_id: CallClaims(work, view),
    objects=_store_claims,
)
