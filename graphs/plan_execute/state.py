"""State of the `plan_execute` graph."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from typing_extensions import TypedDict

from graphs.runtime.state import MessagesInput
from graphs.runtime.ui import UIMessages


class InputState(MessagesInput, total=False):
    """What a caller sends: new messages (the task is the last human message), or, while the run
    waits for plan approval, a `reply` to it (any resume value; the router sends it this way)."""

    reply: Any
    """An answer to the pending plan approval, read like a resume value."""
    awaiting: dict | None
    """The approval request being answered (the router passes it on with `reply`)."""


Status = Literal["running", "completed", "partial", "rejected", "failed"]


def merge_log(old: list[dict], new: list[dict]) -> list[dict]:
    """Merge execution-log entries by `step_id`: a newer entry replaces the older one in place."""
    merged = {entry["step_id"]: entry for entry in old or []}
    for entry in new or []:
        merged[entry["step_id"]] = entry
    return list(merged.values())


class State(InputState, total=False):
    """The thread's state: messages plus the plan, what happened to each step, and the outcome."""

    plan: list[dict]
    """The current plan: steps with `id`, `description`, `tool`, `args`, `depends_on`."""
    execution_log: Annotated[list[dict], merge_log]
    """One entry per step: `step_id`, `description`, `tool`, `args`, `status` (completed,
    recovered, failed, skipped, dropped), `result` or `error`, `attempts`, `duration_ms`,
    `recovery`, `wave`."""
    replans: int
    """Revisions of the plan made in this request."""
    waves: int
    """Waves of steps run in this request."""
    final_answer: str
    """The synthesized answer (also the last AI message in `messages`)."""
    status: Status
    """running, then completed | partial (a failure not replanned around, or a skipped step) |
    rejected (plan refused at approval) | failed (no valid plan)."""

    awaiting_since: str | None
    """Id of the newest message when the approval was asked: later chat messages answer it."""
    ui: UIMessages
    """Generative-UI cards of the thread's runs (docs/events.md), for chat clients."""
    review: str
    """How the last plan approval was answered: approve, edit, reject or feedback (plan again)."""


class StepInput(TypedDict):
    """What one `run_step` task receives (through `Send`)."""

    step: dict
    task: str
    dependencies: list[dict]
    wave: int
