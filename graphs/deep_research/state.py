"""State of the `deep_research` graph and of its researcher subgraph."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from typing_extensions import TypedDict

from graphs.runtime.state import MessagesInput
from graphs.runtime.ui import UIMessages


class InputState(MessagesInput, total=False):
    """What a caller sends: new messages, or, while the run waits for the answer to a clarifying
    question, a `reply` (any resume value; the router sends it this way)."""

    reply: Any
    """The answer to the pending clarifying question, read like a resume value."""
    clarification: str
    """The clarifying question waiting for its answer ('' when none); the router passes it on
    with `reply`."""


class SubQuestion(TypedDict):
    """One unit of research: a question and the web searches that answer it."""

    question: str
    queries: list[str]


class State(InputState, total=False):
    """The thread's state. `brief`, `plan`, `notes`, `sources` and `report` are for clients and evals."""

    brief: str
    """The research brief: what the report must answer, for whom, with which constraints."""
    plan: list[str]
    """Sub-questions of this turn, in the order they were researched (reflection adds more)."""
    pending: list[SubQuestion]
    """Sub-questions of the current round not yet given to a researcher."""
    wave: list[SubQuestion]
    """Sub-questions handed to researchers in the current wave."""
    round: int
    """Current research round (1 = the plan's round)."""
    waves: int
    """Waves dispatched so far in this turn (researcher ids are `r<wave>.<n>`)."""
    notes: Annotated[list[dict], operator.add]
    """One entry per researcher: {researcher_id, question, text} (claims cite source URLs)."""
    sources: Annotated[list[dict], operator.add]
    """Every source retrieved this turn: {url, title, researcher_id, kind ('page'|'search'|'kb')}."""
    research_log: Annotated[list[dict], operator.add]
    """One entry per researcher: {researcher_id, round, question, status, sources_found,
    sources_read, error}."""
    ui: UIMessages
    """Generative-UI cards of the thread's runs (docs/events.md), for chat clients."""
    report: str
    """The final report (citations validated), '' when research failed."""


class ResearcherInput(TypedDict):
    """What the supervisor sends each researcher."""

    researcher_id: str
    round: int
    question: str
    queries: list[str]
    brief: str


class ResearcherState(ResearcherInput, total=False):
    """A researcher's working data between its steps."""

    hits: list[dict]
    pages: list[dict]
    errors: list[str]
