"""Remap: stored replies -> slot labels -> identity outcomes -> dispositions.

`gate` refuses a run whose calls, hashes or texts disagree with the trusted map, or where
anything but the map claims to know identities; `outcomes` joins a run's calls with their
replies by call key and with the presentation map by presentation id only, parses labels
and writes the run's labels and outcomes; `dispositions` classifies each (pair, judge
config) and builds the disclosure table.
"""

from tasks.remap.dispositions import (
    compute_disclosure,
    compute_dispositions,
    two_order_disposition,
)
from tasks.remap.gate import RunRef, check_call_columns, check_remap, identity_claims
from tasks.remap.outcomes import (
    ParsedLike,
    RemapResult,
    parse_labels,
    read_calls,
    read_run_ref,
    remap_outcomes,
    remap_run,
    write_remap,
)

__all__ = [
    "ParsedLike",
    "RemapResult",
    "RunRef",
    "check_call_columns",
    "check_remap",
    "compute_disclosure",
    "compute_dispositions",
    "identity_claims",
    "parse_labels",
    "read_calls",
    "read_run_ref",
    "remap_outcomes",
    "remap_run",
    "two_order_disposition",
    "write_remap",
]
