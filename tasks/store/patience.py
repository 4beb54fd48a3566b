"""How long an object store that does not answer is waited for: the patience, obstore's
retry configuration for it, and the words of a request the store left unanswered."""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from obstore.store import RetryConfig

PATIENCE_ENV = "JUDGELINE_STORE_PATIENCE_SECONDS"
DEFAULT_PATIENCE_S = 300.0
FIRST_PATIENCE_S = 10.0
"""The patience for a store that has not answered this process yet."""
MAX_PATIENCE_S = 600.0
"""A retried request keeps its signature, which S3 accepts for 15 minutes."""


def store_patience() -> float:
    """How long a request the store does not answer (a lost link, a 5xx) is retried, with
    backoff, before it fails: $JUDGELINE_STORE_PATIENCE_SECONDS, else 5 minutes; between
    1 s and 10 minutes."""
    try:
        chosen = float(os.environ.get(PATIENCE_ENV, DEFAULT_PATIENCE_S))
    except ValueError:
        chosen = DEFAULT_PATIENCE_S
    return min(MAX_PATIENCE_S, max(1.0, chosen))


def retry_pause_cap(patience_s: float) -> float:
    """The longest pause between two tries of a request: a tenth of the patience, 1 to 15 s."""
    return min(15.0, max(1.0, patience_s / 10))


def retry_config(patience_s: float) -> RetryConfig:
    """obstore's retry configuration: retries until `patience_s` has passed, backing off
    from 0.1 s up to a tenth of the patience (1 to 15 s) between attempts."""
    return {
        "max_retries": 100_000,
        "retry_timeout": dt.timedelta(seconds=patience_s),
        "backoff": {
            "init_backoff": dt.timedelta(milliseconds=100),
            "max_backoff": dt.timedelta(seconds=retry_pause_cap(patience_s)),
        },
    }


UNANSWERED = re.compile(r"after \d+ retries|error sending request|timed out|connection",
                         re.IGNORECASE)  # fmt: skip
"""The words of a request the store did not answer (as opposed to one it refused)."""
