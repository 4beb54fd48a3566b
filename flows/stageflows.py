"""Each stage as a flow of its own: what `judgeline judge`, `judgeline remap` and Python
callers run when they run one stage alone.

Inside a nightly run, an import or a rerun, the stages run as task runs of that flow
(`flows.judge`, `flows.prepare`, `flows.remap`, `flows.replay`), and these flows are not
built: building a flow builds the JSON schema of its parameters, 0.1 s for these six (the
judge stages' judges are large models).
"""

from __future__ import annotations

from flows.judge import judge_stage, rerun_failed_stage
from flows.prepare import freeze_stage, plan_stage
from flows.remap import remap_stage
from flows.replay import replay_stage
from flows.runtime import flow

judge_flow = flow(name="judge-calls")(judge_stage)
rerun_failed_flow = flow(name="judge-rerun-failed")(rerun_failed_stage)
freeze_flow = flow(name="freeze-manifest")(freeze_stage)
plan_flow = flow(name="plan-orders")(plan_stage)
remap_flow = flow(name="remap-identities")(remap_stage)
replay_flow = flow(name="replay-policies")(replay_stage)
