"""Replay: exact expectations of stopping policies over the K x 2 outcome grid.

`coded` reads the replay input once as small codes, `grid` checks and lays out each
group's grid from them; `policies` defines the stopping rules;
`designs` enumerates every order assignment of a design exactly; `matching` computes the
cost to match and the nonadaptive envelope; `engine` runs it all and writes the replay,
summary, design and components tables.
"""

from tasks.replay.designs import PatternMetrics, assignments, component_costs, evaluate_patterns
from tasks.replay.engine import (
    DESIGNS,
    POLICIES,
    ReplayResult,
    design_policy_pairs,
    replay,
    write_replay,
)
from tasks.replay.grid import ReplayGrid, build_grid, dense_codes, read_replay_input, replay_grids
from tasks.replay.matching import cost_to_match, upper_envelope
from tasks.replay.policies import (
    balanced_pair_agreement,
    count_index,
    decision,
    full_decision_table,
    paired_unanimity,
    stopping_table,
    subset_agreement_table,
)

__all__ = [
    "DESIGNS",
    "POLICIES",
    "PatternMetrics",
    "ReplayGrid",
    "ReplayResult",
    "assignments",
    "balanced_pair_agreement",
    "build_grid",
    "component_costs",
    "cost_to_match",
    "count_index",
    "decision",
    "dense_codes",
    "design_policy_pairs",
    "evaluate_patterns",
    "full_decision_table",
    "paired_unanimity",
    "read_replay_input",
    "replay",
    "replay_grids",
    "stopping_table",
    "subset_agreement_table",
    "upper_envelope",
    "write_replay",
]
