"""The run-level deadline (`run_timeout` in the run's context, AGENT_RUN_TIMEOUT).

Every model call (`ainvoke_with_retries`) and every tool batch (`run_tool_calls`) asks
`remaining_time()` first: the clock of a run starts at its first model or tool call, each call is
bounded by what is left, and once the deadline has passed the call raises `RunDeadlineExceeded`
(after one `run_deadline_exceeded` event) instead of running on. A graph that can still answer
turns it into a streamed message (`deadline_message`); elsewhere the error ends the run with the
same text. A run is told apart by the server's request id (`langgraph_api`) or run id (Aegra),
which its subgraphs see too, or in-process by the run id in its config (`Runtime.execution_info.run_id`); a graph
invoked in-process without `run_id` has no deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from langgraph.config import get_config
from langgraph.runtime import get_runtime

from graphs.runtime.events import emit
from graphs.runtime.prompts import DEADLINE_MESSAGE
from store.lru import LRU
from tools.server_api import server_run_key

_MAX_RUNS = 4096


@dataclass
class _Clock:
    started: float
    reported: bool = False


_CLOCKS: LRU[str, _Clock] = LRU(_MAX_RUNS)
"""When each run this process serves started (by run id): a bounded LRU cache (store/lru.py) of
`_MAX_RUNS` runs; a run forgotten early only has its clock start again at its next check."""


class RunDeadlineExceeded(RuntimeError):
    """The run's deadline passed. Its message is meant for the user (the server shows it)."""

    def __init__(self, deadline_s: float, elapsed_s: float) -> None:
        super().__init__(deadline_message(deadline_s))
        self.deadline_s = deadline_s
        self.elapsed_s = elapsed_s


def deadline_message(deadline_s: float) -> str:
    """What the user reads when a run ran out of time."""
    return " ".join(DEADLINE_MESSAGE.format(deadline=deadline_s).split())


def _run() -> tuple[str, float] | None:
    """(run key, deadline seconds) of the current run, or None when it has no deadline.

    The key is the same in a run's subgraphs: the server's request or run id (in the
    `configurable` every subgraph inherits, tools/server_api.py) with the thread, else the run id
    of an in-process run (which its subgraphs do not see)."""
    try:
        config = get_config()
        runtime = get_runtime()
    except (RuntimeError, KeyError):  # outside a graph run
        return None
    deadline = getattr(getattr(runtime, "context", None), "run_timeout", None)
    if not deadline:
        return None
    configurable = config.get("configurable") or {}
    request = server_run_key(configurable)
    if request:
        return f"{request}/{configurable.get('thread_id', '')}", float(deadline)
    info = runtime.execution_info
    if info is None or not info.run_id:
        return None
    return str(info.run_id), float(deadline)


def remaining_time(stage: str) -> float | None:
    """Seconds left before the run's deadline (None: no deadline). Raises RunDeadlineExceeded,
    with one `run_deadline_exceeded` event per run, once it has passed. `stage` names what was
    about to start (`model`, `tools`)."""
    run = _run()
    if run is None:
        return None
    run_id, deadline = run
    clock = _CLOCKS.get(run_id) or _CLOCKS.put(run_id, _Clock(time.monotonic()))
    elapsed = time.monotonic() - clock.started
    left = deadline - elapsed
    if left > 0:
        return left
    if not clock.reported:
        clock.reported = True
        emit("run_deadline_exceeded", deadline_s=deadline, elapsed_s=round(elapsed, 3), stage=stage)
    raise RunDeadlineExceeded(deadline, elapsed)


def bounded(timeout: float | None, stage: str) -> float | None:
    """`timeout` cut to the time left before the run's deadline (raises when none is left)."""
    left = remaining_time(stage)
    if left is None:
        return timeout
    return left if timeout is None else min(timeout, left)
