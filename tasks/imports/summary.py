"""An imported run's summary per judge config: what `judgeline import` prints and records.

Pairs and seeds, replies and judgments recorded without a reply, replies without a verdict by
reason (Invalid notes without what they quote, and abstentions), the parser's agreement with
the verdicts the files record, and the two-order dispositions per (pair, seed).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from tasks.imports.agreement import agreement
from tasks.prompts.parsing import note_reason
from tasks.runs.folder import RunFolder

__all__ = ["import_summary", "summary_lines"]


def import_summary(folder: RunFolder) -> list[dict[str, Any]]:
    """One summary per (judge, config) of an imported run, from its stored tables."""
    calls = pq.read_table(folder.calls)
    labels = pq.read_table(folder.table("labels"))
    imported = pq.read_table(folder.table("imported"))
    dispositions = pq.read_table(folder.table("dispositions"))
    label_of = dict(zip(labels["call_key"].to_pylist(), labels["label"].to_pylist(), strict=True))
    note_of = dict(zip(labels["call_key"].to_pylist(), labels["note"].to_pylist(), strict=True))
    out = []
    groups = sorted(set(zip(calls["judge"].to_pylist(), calls["config"].to_pylist(), strict=True)))
    for judge, config in groups:
        mine = calls.filter(
            pc.and_(pc.equal(calls["judge"], judge), pc.equal(calls["config"], config))
        )
        keys = mine["call_key"].to_pylist()
        status = Counter(mine["status"].to_pylist())
        why: Counter[str] = Counter()
        for key in keys:
            label = label_of.get(key)
            if label == "Invalid":
                why[note_reason(note_of[key])] += 1
            elif label == "Abstain":
                why["abstained"] += 1
        agree = agreement(
            imported.filter(pc.is_in(imported["call_key"], mine["call_key"])), labels, mine
        )
        disp = dispositions.filter(
            pc.and_(
                pc.equal(dispositions["judge"], judge), pc.equal(dispositions["config"], config)
            )
        )
        out.append(
            {
                "judge": judge,
                "config": config,
                "pairs": len(set(disp["pair_id"].to_pylist())),
                "seeds": len(set(mine["seed"].to_pylist())),
                "replies": status["stored"],
                "without_reply": status["failed"],
                "without_verdict": dict(why),
                "agreement": {"compared": agree["compared"], "agree": agree["agree"]},
                "dispositions": dict(Counter(disp["disposition"].to_pylist())),
            }
        )
    return out


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """One judge config's summary as the lines `judgeline import` prints."""
    why = summary["without_verdict"]
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(why.items(), key=lambda x: -x[1]))
    agree = summary["agreement"]
    disp = ", ".join(
        f"{d} {n}" for d, n in sorted(summary["dispositions"].items(), key=lambda x: -x[1])
    )
    return [
        f"{summary['judge']} / {summary['config']}: {summary['pairs']} pairs x {summary['seeds']} "
        f"seed(s), {summary['replies']} replies, {summary['without_reply']} recorded without a "
        "reply",
        f"  replies without a verdict: {sum(why.values())}" + (f" ({reasons})" if reasons else ""),
        f"  parser agrees with the files' recorded verdicts on {agree['agree']} of "
        f"{agree['compared']} replies"
        if agree["compared"]
        else "  the files record no verdicts to compare the parser with",
        f"  dispositions (pair x seed): {disp or 'none'}",
    ]
