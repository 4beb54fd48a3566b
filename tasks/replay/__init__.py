"""Replay: exact expectations of stopping policies over the K x 2 outcome grid.

`coded` reads the replay input once as small codes, `grid` checks and lays out each
group's grid from them; `couples` reduces a pair's grid to the counts of its couple types;
`policies` and `family` define the stopping rules as exact per-state tables; `states` counts
how a design's assignments spread over those states; `designs` combines the two per pattern;
`matching` computes the cost to match and the nonadaptive envelope; `engine` runs it all and
writes the replay, summary, design and components tables; `money` prices them.
"""

from tasks.replay.couples import couple_counts, expected_agreement, grid_counts
from tasks.replay.designs import PatternMetrics, component_costs, evaluate_patterns
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
    run_laws,
    stopping_table,
    subset_agreement_table,
)

__all__ = [
    "DESIGNS",
    "POLICIES",
    "PatternMetrics",
    "ReplayGrid",
    "ReplayResult",
    "balanced_pair_agreement",
    "build_grid",
    "component_costs",
    "cost_to_match",
    "count_index",
    "couple_counts",
    "decision",
    "dense_codes",
    "design_policy_pairs",
    "evaluate_patterns",
    "expected_agreement",
    "full_decision_table",
    "grid_counts",
    "read_replay_input",
    "replay",
    "replay_grids",
    "run_laws",
    "stopping_table",
    "subset_agreement_table",
    "upper_envelope",
    "write_replay",
]
