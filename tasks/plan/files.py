"""Names of a stored plan's files and the form of its id."""

from __future__ import annotations

import re

PLAN_FILE = "presentations.parquet"
PLAN_INFO_FILE = "plan.json"
PLAN_ID = re.compile(r"[0-9a-f]{64}")
