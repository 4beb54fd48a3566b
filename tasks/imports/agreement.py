"""How often judgeline's parser agrees with the verdict an imported file records.

A file's verdict and judgeline's label are both about the slots of the display the reply
was made on, so they compare directly. A file that records no verdict (null) agrees with a
label that is no verdict either (`Invalid` or `Abstain`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = ["agreement"]

_NO_VERDICT = frozenset({"Invalid", "Abstain"})


def agreement(imported: pa.Table, labels: pa.Table, calls: pa.Table) -> dict[str, Any]:
    """Counts of compared, agreeing and disagreeing replies, and every disagreement.

    Only replies with text are compared (a null judgment is `M`, not a label), and nothing
    when no row records a verdict (a judgments table without a verdict column: there is
    nothing to agree with).
    """
    label_of = {r["call_key"]: r for r in labels.select(["call_key", "label", "note"]).to_pylist()}
    call_of = {
        r["call_key"]: r
        for r in calls.select(["call_key", "presentation_id", "seed", "status"]).to_pylist()
    }
    compared = agree = 0
    disagreements: list[dict[str, Any]] = []
    rows = imported.to_pylist()
    if all(row["recorded_verdict"] is None for row in rows):
        rows = []
    for row in rows:
        parsed = label_of.get(row["call_key"])
        if parsed is None:
            continue
        compared += 1
        recorded = row["recorded_label"]
        same = parsed["label"] == recorded or (recorded is None and parsed["label"] in _NO_VERDICT)
        if same:
            agree += 1
            continue
        disagreements.append(
            {
                "source_file": row["source_file"],
                "source_line": row["source_line"],
                "judgment": row["judgment"],
                "presentation_id": call_of[row["call_key"]]["presentation_id"],
                "seed": call_of[row["call_key"]]["seed"],
                "recorded_verdict": row["recorded_verdict"],
                "recorded_label": recorded,
                "parsed_label": parsed["label"],
                "note": parsed["note"],
            }
        )
    return {
        "compared": compared,
        "agree": agree,
        "disagree": len(disagreements),
        "disagreements": disagreements,
    }
