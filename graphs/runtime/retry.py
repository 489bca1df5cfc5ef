"""Backoff shared by tool and model retries."""

import os
import random

BACKOFF_MAX_S = 8.0


def backoff_delay(attempt: int) -> float:
    """Exponential backoff with jitter for retry `attempt` (1-based).

    Base delay `AGENT_RETRY_BASE_DELAY` seconds (default 0.5): ~0.5 s, 1 s, 2 s ... capped at 8 s.
    """
    base = float(os.environ.get("AGENT_RETRY_BASE_DELAY") or 0.5)
    return min(BACKOFF_MAX_S, base * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
