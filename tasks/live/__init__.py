"""Live paired unanimity: the policy executed against real calls, in waves.

`draws` draws each pair's reference and couples; `stage` sends the waves through the
judge stage; `outcomes` remaps what was sent, decides the stops and summarises realised
against expected savings; `runs` keeps the bookkeeping (live runs, their reference run).
"""

from tasks.live.draws import Group, Slot, draw_live, draw_pair, slots_of, wave_calls, write_draws
from tasks.live.outcomes import (
    LIVE_DESIGN,
    LIVE_POLICY,
    first_couple_stops,
    live_pairs,
    live_summary,
    remap_executed,
    remap_live,
    replay_draws,
    write_live_tables,
)
from tasks.live.runs import find_reference_run, is_live_run, read_live_summary, record_live_info
from tasks.live.stage import LiveRequest, Remapper, run_live_stage

__all__ = [
    "Group",
    "LIVE_DESIGN",
    "LIVE_POLICY",
    "LiveRequest",
    "Remapper",
    "Slot",
    "draw_live",
    "draw_pair",
    "find_reference_run",
    "first_couple_stops",
    "is_live_run",
    "live_pairs",
    "live_summary",
    "read_live_summary",
    "record_live_info",
    "remap_executed",
    "remap_live",
    "replay_draws",
    "run_live_stage",
    "slots_of",
    "wave_calls",
    "write_draws",
    "write_live_tables",
]
