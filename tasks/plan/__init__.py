"""Plans: which display order each (pair, seed) gets, stored once as the trusted presentation map.

`designs` draws the full grid or one design per pair, `gate` checks a plan against its
manifest, `store` writes it once and reads it back gated; `files` names its files;
`orders` runs the whole plan job.
"""

from tasks.plan.designs import (
    check_design,
    check_k,
    check_plan_request,
    design_assignments,
    draw_design,
    make_plan,
    plan_full_grid,
    plan_id_of,
    presentation_id_of,
)
from tasks.plan.files import PLAN_FILE, PLAN_INFO_FILE
from tasks.plan.gate import gate_plan
from tasks.plan.orders import draw_rng_seed, plan_orders
from tasks.plan.store import list_plans, read_plan, resolve_plan_id, write_plan

__all__ = [
    "PLAN_FILE",
    "PLAN_INFO_FILE",
    "check_design",
    "check_k",
    "check_plan_request",
    "design_assignments",
    "draw_rng_seed",
    "draw_design",
    "gate_plan",
    "list_plans",
    "make_plan",
    "plan_full_grid",
    "plan_id_of",
    "plan_orders",
    "presentation_id_of",
    "read_plan",
    "resolve_plan_id",
    "write_plan",
]
