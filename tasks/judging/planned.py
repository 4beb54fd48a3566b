"""Planned judge calls: one per (presentation, judge, reasoning config), and their records.

Rendering follows the trusted presentation map only: the left slot gets the answer of the
presentation's `left_identity`. A planned call names slots and hashes, never identities.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from schemas.arrow import conform
from schemas.calls import CallRecord
from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from schemas.vocabulary import ErrorCategory
from tasks.errors import IntegrityError
from tasks.judging.callkey import CallKeyer, messages_sha256
from tasks.judging.providers import CallRequest
from tasks.prompts.templates import RenderedPrompt, render

__all__ = [
    "PlannedCall",
    "attempts_made",
    "call_records",
    "last_failures",
    "plan_calls",
    "sent_by_run",
]

REPEAT = 0
"""Repeat index of every planned call: a seed is one call; repeats are other seeds."""


@dataclass(slots=True)
class PlannedCall:
    """One judge call to make: a presentation rendered for one judge configuration.

    Not frozen: a plan holds 100,000s of these and frozen dataclasses build far slower.
    """

    run_id: str
    judge: JudgeSpec
    config: ReasoningConfig
    dataset: str
    presentation_id: str
    pair_id: str
    seed: int
    call_key: str
    template_id: str
    template_hash: str
    left_sha256: str
    right_sha256: str
    messages: tuple[dict[str, str], ...]
    digest: str = ""
    """SHA-256 of `messages`: with the judge and config, the prompt its repeats share."""
    attempts_before: int = 0
    """Attempts at this call key in the attempts log before this run (see `attempts_made`)."""

    def request(self) -> CallRequest:
        """What the client sends for this call."""
        return CallRequest(
            call_key=self.call_key,
            messages=self.messages,
            seed=self.seed,
            config=self.config,
            attempts_before=self.attempts_before,
            digest=self.digest or None,
            template_id=self.template_id,
        )

    @property
    def prompt(self) -> tuple[str, str, str]:
        """(judge, config, messages' SHA-256): the calls that send the same prompt, the
        repeats a provider's prompt cache can serve (`tasks.judging.prompt_cache`)."""
        return (self.judge.name, self.config.name, self.digest)


def _manifest_rows(manifest_table: pa.Table) -> dict[str, dict[str, Any]]:
    cols = ["manifest_hash", "pair_id", "dataset", "question", "answer_a", "answer_b", "reference"]
    rows = manifest_table.select(cols).to_pylist()
    return {r["pair_id"]: r for r in rows}


def plan_calls(
    manifest_table: pa.Table,
    presentations: pa.Table,
    judges: Sequence[JudgeSpec],
    template_id: str,
    run_id: str,
    scope: str | None = None,
) -> list[PlannedCall]:
    """Every call of a run, in presentation order, each with its call key (in `scope`, if
    given: `tasks.judging.callkey.CallKeyer`).

    Raises IntegrityError if a presentation names a pair or manifest the table lacks, or
    its slot identities are not one A and one B.
    """
    pairs = _manifest_rows(manifest_table)
    keyers = [
        (judge, config, CallKeyer(judge, config, scope))
        for judge in judges
        for config in judge.configs
    ]
    prompts: dict[tuple[str, str], tuple[RenderedPrompt, str]] = {}
    cols = ["presentation_id", "manifest_hash", "pair_id", "seed", "left_identity"]
    cols += ["right_identity"]
    out: list[PlannedCall] = []
    for p in presentations.select(cols).to_pylist():
        pid = p["presentation_id"]
        pair = pairs.get(p["pair_id"])
        if pair is None:
            raise IntegrityError(
                f"presentation {pid}: pair {p['pair_id']!r} is not in the manifest"
            )
        if p["manifest_hash"] != pair["manifest_hash"]:
            raise IntegrityError(
                f"presentation {pid}: manifest {p['manifest_hash']} is not the manifest read "
                f"({pair['manifest_hash']})"
            )
        if {p["left_identity"], p["right_identity"]} != {"A", "B"}:
            raise IntegrityError(
                f"presentation {pid}: slots hold {p['left_identity']!r} and "
                f"{p['right_identity']!r}, not one A and one B"
            )
        # The messages depend on (pair, left identity) only: render and hash them once.
        memo_key = (p["pair_id"], p["left_identity"])
        if memo_key not in prompts:
            answers = {"A": pair["answer_a"], "B": pair["answer_b"]}
            prompt = render(
                template_id,
                question=pair["question"],
                left=answers[p["left_identity"]],
                right=answers[p["right_identity"]],
                reference=pair["reference"],
            )
            prompts[memo_key] = (prompt, messages_sha256(prompt.messages))
        prompt, msg_digest = prompts[memo_key]
        for judge, config, keyer in keyers:
            key = keyer.key(
                seed=p["seed"],
                repeat=REPEAT,
                template_id=prompt.template_id,
                template_hash=prompt.template_hash,
                messages_digest=msg_digest,
            )
            out.append(
                PlannedCall(
                    run_id=run_id,
                    judge=judge,
                    config=config,
                    dataset=pair["dataset"],
                    presentation_id=pid,
                    pair_id=p["pair_id"],
                    seed=p["seed"],
                    call_key=key,
                    template_id=prompt.template_id,
                    template_hash=prompt.template_hash,
                    left_sha256=prompt.left_sha256,
                    right_sha256=prompt.right_sha256,
                    messages=prompt.messages,
                    digest=msg_digest,
                )
            )
    return out


def _attempts_at(attempts: pa.Table, call_keys: Iterable[str]) -> pa.Table:
    """The rows of the attempts log for `call_keys`."""
    wanted = pa.array(sorted(set(call_keys)), type=pa.string())
    return attempts.filter(pc.is_in(attempts.column("call_key"), value_set=wanted))


def attempts_made(attempts: pa.Table, call_keys: Iterable[str]) -> dict[str, int]:
    """For each of `call_keys` tried before: the highest attempt number in the log, so a
    rerun numbers its attempts after the earlier runs' instead of from 1 again."""
    table = _attempts_at(attempts, call_keys)
    if table.num_rows == 0:
        return {}
    top = table.group_by("call_key").aggregate([("attempt", "max")])
    return dict(
        zip(top.column("call_key").to_pylist(), top.column("attempt_max").to_pylist(), strict=True)
    )


def sent_by_run(attempts: pa.Table, run_id: str, call_keys: Iterable[str]) -> set[str]:
    """The `call_keys` this run has sent at least once (any attempt, failed ones too), in
    any of its stages: a resumed, rerun or rebuilt run keeps what it sent before."""
    mine = attempts.filter(pc.equal(attempts.column("run_id"), run_id))
    return set(mine.column("call_key").to_pylist()) & set(call_keys)


def last_failures(attempts: pa.Table, call_keys: Iterable[str]) -> dict[str, ErrorCategory]:
    """For each of `call_keys` whose latest attempt failed: that attempt's category."""
    table = _attempts_at(attempts, call_keys)
    if table.num_rows == 0:
        return {}
    table = table.select(["call_key", "started_at", "attempt", "ok", "error_category"])
    table = table.sort_by([("started_at", "ascending"), ("attempt", "ascending")])
    latest: dict[str, tuple[bool, Any]] = {}
    for key, ok, category in zip(
        table.column("call_key").to_pylist(),
        table.column("ok").to_pylist(),
        table.column("error_category").to_pylist(),
        strict=True,
    ):
        latest[key] = (ok, category)
    return {k: c for k, (ok, c) in latest.items() if not ok and c is not None}


def call_records(
    planned: Sequence[PlannedCall], stored: set[str], failures: dict[str, ErrorCategory]
) -> pa.Table:
    """The CallRecord table of a run: stored if the cache has a reply, else failed (with the
    latest attempt's category) if one was tried, else pending."""
    status: list[str] = []
    category: list[str | None] = []
    for c in planned:
        if c.call_key in stored:
            status.append("stored")
            category.append(None)
        elif c.call_key in failures:
            status.append("failed")
            category.append(failures[c.call_key])
        else:
            status.append("pending")
            category.append(None)
    columns: dict[str, list[Any]] = {
        "run_id": [c.run_id for c in planned],
        "judge": [c.judge.name for c in planned],
        "config": [c.config.name for c in planned],
        "dataset": [c.dataset for c in planned],
        "presentation_id": [c.presentation_id for c in planned],
        "call_key": [c.call_key for c in planned],
        "provider": [c.judge.provider for c in planned],
        "model": [c.judge.model for c in planned],
        "template_id": [c.template_id for c in planned],
        "template_hash": [c.template_hash for c in planned],
        "seed": [c.seed for c in planned],
        "left_sha256": [c.left_sha256 for c in planned],
        "right_sha256": [c.right_sha256 for c in planned],
        "status": status,
        "error_category": category,
    }
    return conform(pa.table(columns), CallRecord, where="calls table")
