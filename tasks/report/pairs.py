"""Reading disagreements: each unsettled (pair, seed) of a run with its question, both
answers by identity, and the AB and BA replies with their parsed labels.

A (pair, seed) is unsettled when its disposition is an order conflict, mixed or incomplete
(docs/design.md#dispositions). `pair_views` gathers them from the run's tables, the frozen
manifest and the reply cache (nothing is sent); `pair_text` prints one pair for the terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.errors import InputError
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

__all__ = ["UNSETTLED", "PairCall", "PairView", "answer_label", "pair_text", "pair_views"]

UNSETTLED = ("order_conflict", "mixed", "incomplete_M", "incomplete_I", "incomplete_X")
"""The dispositions a reader opens one by one, in the order the report groups them."""


@dataclass(frozen=True)
class PairCall:
    """One order's call: which identity sat left, the reply (None: no reply) and its reading."""

    order: str
    left: str
    right: str
    reply: str | None
    label: str | None
    outcome: str
    note: str | None
    recorded: str | None
    """The verdict the imported file records for this reply as it wrote it, in its tool's slot
    letters (None: not imported, or none)."""
    recorded_label: str | None = None
    """That verdict as a slot label of this call's display (None: none a label reads)."""
    recorded_outcome: str | None = None
    """The identity outcome the file's verdict names through this call's order."""


@dataclass(frozen=True)
class PairView:
    """One unsettled (pair, seed) of one judge and config."""

    judge: str
    config: str
    dataset: str
    pair_id: str
    seed: int
    disposition: str
    key: str | None
    question: str
    answer_a: str
    answer_b: str
    calls: tuple[PairCall, ...]
    label_a: str = ""
    """Who wrote answer A, from the pair's metadata (`model_a`, `role_a`); empty if unknown."""
    label_b: str = ""

    @property
    def anchor(self) -> str:
        """A stable element id for this view (unique within a run)."""
        from tasks.hashing import sha256_text

        return "pair-" + sha256_text(f"{self.judge}|{self.config}|{self.pair_id}|{self.seed}")[:12]


_SLOT_OUTCOME = {"Tie": "T", "Abstain": "X"}


def _outcome_of(label: str | None, order: str) -> str | None:
    """The identity outcome a slot label names in a call of `order` (`BA`: Left is B)."""
    if label in ("Left", "Right"):
        return order[0] if label == "Left" else order[1]
    return _SLOT_OUTCOME.get(label) if label is not None else None


def answer_label(metadata: str | None, identity: str) -> str:
    """Who wrote the answer of `identity` ("qwq-32b (judged model)"), from the pair's metadata
    keys `model_a`/`model_b` and `role_a`/`role_b`; empty when the metadata names nobody."""
    import json

    try:
        meta = json.loads(metadata or "{}")
    except ValueError:
        return ""
    side = identity.lower()
    name, role = meta.get(f"model_{side}"), meta.get(f"role_{side}")
    name = str(name) if isinstance(name, str | int) and str(name) else ""
    role = str(role) if isinstance(role, str) and role else ""
    return f"{name} ({role})" if name and role else name or role


def _read(folder: RunFolder, name: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    path = folder.table(name)
    return pq.read_table(path).to_pylist() if path.is_file() else []


def pair_views(work: WorkDir, run_id: str, pair_id: str | None = None) -> list[PairView]:
    """The run's unsettled (pair, seed) views (only `pair_id`'s, any disposition, if given),
    ordered by judge, config, disposition, dataset, pair and seed."""
    from tasks.ingest.manifest import read_manifest
    from tasks.judging.cache import read_replies
    from tasks.runs.record import read_record

    folder = RunFolder(work, run_id)
    record = read_record(work, run_id)
    rows = [
        d
        for d in _read(folder, "dispositions")
        if (d["pair_id"] == pair_id if pair_id is not None else d["disposition"] in UNSETTLED)
    ]
    if pair_id is not None and not rows:
        raise InputError(f"run {run_id} has no judged pair {pair_id!r} (no disposition for it)")
    if not rows or record.manifest_hash is None:
        return []
    wanted = {d["pair_id"] for d in rows}
    outcomes: dict[tuple[Any, ...], dict[str, Any]] = {
        (o["judge"], o["config"], o["pair_id"], o["seed"], o["order"]): o
        for o in _read(folder, "outcomes")
        if o["pair_id"] in wanted
    }
    keys = {o["call_key"] for o in outcomes.values() if o["call_key"]}
    notes = {r["call_key"]: r["note"] for r in _read(folder, "labels") if r["call_key"] in keys}
    recorded = {r["call_key"]: r for r in _read(folder, "imported")}
    texts = {
        r["call_key"]: r["raw_reply"]
        for r in read_replies(work, keys).select(["call_key", "raw_reply"]).to_pylist()
    }
    _, manifest = read_manifest(work, record.manifest_hash)
    pairs = {
        p["pair_id"]: p
        for p in manifest.select(
            ["pair_id", "question", "answer_a", "answer_b", "metadata"]
        ).to_pylist()
        if p["pair_id"] in wanted
    }
    views = []
    for d in rows:
        calls = []
        for order in ("AB", "BA"):
            o = outcomes.get((d["judge"], d["config"], d["pair_id"], d["seed"], order))
            if o is None:
                continue
            key = o["call_key"]
            file = recorded.get(key, {})
            calls.append(
                PairCall(
                    order=order,
                    left=order[0],
                    right=order[1],
                    reply=texts.get(key),
                    label=o["label"],
                    outcome=o["outcome"],
                    note=notes.get(key),
                    recorded=file.get("recorded_verdict"),
                    recorded_label=file.get("recorded_label"),
                    recorded_outcome=_outcome_of(file.get("recorded_label"), order),
                )  # fmt: skip
            )
        pair = pairs[d["pair_id"]]
        views.append(
            PairView(
                judge=d["judge"],
                config=d["config"],
                dataset=d["dataset"],
                pair_id=d["pair_id"],
                seed=d["seed"],
                disposition=d["disposition"],
                key=d["key"],
                question=pair["question"],
                answer_a=pair["answer_a"],
                answer_b=pair["answer_b"],
                calls=tuple(calls),
                label_a=answer_label(pair["metadata"], "A"),
                label_b=answer_label(pair["metadata"], "B"),
            )  # fmt: skip
        )
    rank = {name: i for i, name in enumerate(UNSETTLED)}
    views.sort(
        key=lambda v: (
            v.judge,
            v.config,
            rank.get(v.disposition, -1),
            v.dataset,
            v.pair_id,
            v.seed,
        )  # fmt: skip
    )
    return views


def _reading(call: PairCall) -> str:
    """`Left -> A` style: the parsed slot label and the identity it maps to."""
    label = call.label or "no reply"
    note = f" ({call.note})" if call.note else ""
    file = ""
    if call.recorded is not None:
        named = (
            f"{call.recorded_label} -> {call.recorded_outcome}"
            if call.recorded_label
            else "no verdict judgeline reads"
        )
        file = f"; the file records {named} (it wrote {call.recorded!r})"
    return f"parsed {label} -> outcome {call.outcome}{note}{file}"


def pair_text(view: PairView) -> str:
    """One view as plain text: the pair, then each order's reply under its parsed verdict."""
    rule = "-" * 72
    lines = [
        f"pair {view.pair_id}  seed {view.seed}  judge {view.judge} / {view.config}  "
        f"dataset {view.dataset}",
        f"disposition {view.disposition}; key {view.key or 'none'}",
        rule,
        "QUESTION",
        view.question,
        rule,
        f"ANSWER A: {view.label_a}" if view.label_a else "ANSWER A",
        view.answer_a,
        rule,
        f"ANSWER B: {view.label_b}" if view.label_b else "ANSWER B",
        view.answer_b,
    ]
    for call in view.calls:
        lines += [
            rule,
            f"ORDER {call.order} (left: {call.left}, right: {call.right}): {_reading(call)}",
            call.reply if call.reply is not None else "(no reply)",
        ]
    return "\n".join(lines)
