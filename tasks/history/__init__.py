"""History: runs compared with runs. `view` reads one finished run from its folder (pairs,
reference decisions, headline figures per judge config); `diff` says what changed between
two runs (pairs and configs added and removed, calls sent and reused, score changes with a
paired bootstrap interval, consistency, position bias, valid share, flipped decisions);
`previous` finds the previous readable run of the same configuration;
`trends` and `page` draw every judge config's history across runs from the warehouse;
`probe` re-judges a fixed sample with fresh calls each night and compares it with the last;
`alarms` checks a run's thresholds (the flow emits them as Prefect events).
"""

from tasks.history.diff import (
    BOOTSTRAP_RESAMPLES,
    ConfigChange,
    Flip,
    RunDiff,
    diff_runs,
    diff_views,
    flips_frame,
    paired_interval,
)
from tasks.history.view import CONFIG_KEYS, PAIR_KEYS, RunView, read_run_view

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "CONFIG_KEYS",
    "PAIR_KEYS",
    "ConfigChange",
    "Flip",
    "RunDiff",
    "RunView",
    "diff_runs",
    "diff_views",
    "flips_frame",
    "paired_interval",
    "read_run_view",
]
