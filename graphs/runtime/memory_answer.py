"""A question the recalled memories answer is answered from them, citing the memory.

A small model shown a note that answers the question (graphs/runtime/memory_recall.py) still
often calls a memory tool instead, sometimes with arguments its schema refuses, and then says it
knows nothing. So when a recalled memory or profile field (not one of the user's own chat
messages, `Recalled.best`) is close to the message (similarity at least the run's
`recall_answer_similarity`), the turn's first model call is a short one without tools: the
notes and the question, and a structured answer (`NoteAnswer`: whether a note states what the
question asks, the answer, which note). Similarity alone does not tell: "Which city does my
sister live in?" is as close to "The user lives in Lisbon" (0.49) as "What do I do for a
living?" is to "The user works as a marine biologist" (0.51); the model's check does.

Only a question is checked (`is_question`): a request about a memory ("Forget that I live in
Lisbon") is as close to it and needs its tools.

When a note answers, that answer is the turn's answer, with the note it came from quoted after
it and listed in `response_metadata.memories_used` (a `memory_answer` event says so). When the
model gives no valid answer, the turn goes on as before: the note in the prompt, the tools
offered. When it checked the notes and none answers (`NoteCheck.unanswered`), the turn goes on
without the memory lookups (the recall already searched the memories with this question: a tool
finds the same ones, and a small model then answers with one of them, "Which city does my
brother live in?" with "The user lives in Lisbon") and the note says it does not answer
(`NOT_ANSWERED_NOTE`): the model answers another way or says it does not know.

A check that contradicts itself is asked again, then left out: "answered" false beside an
answer taken from a valid note ("answered": false, "answer": "You work as a marine biologist.",
"note": 1, seen from a real small model) is neither a yes nor a no. Taken as a no, it would
withhold the memory lookups from a question the note answers; so the model is asked once more
with the contradiction named, and when it contradicts itself again the turn goes on as with no
check: the note in the prompt, the tools offered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from graphs.runtime.events import emit
from graphs.runtime.prompts import NOTE_ANSWER_PROMPT, NOTE_ANSWER_SYSTEM, with_preamble
from graphs.runtime.structured import StructuredOutputError, ainvoke_structured

_QUESTION = re.compile(
    r"\?\s*$|^\s*(?:what|what's|whats|which|where|where's|who|who's|whom|whose|when|why|how|do|does|did"
    r"|am|is|are|was|were|can|could|have|has|tell me|remind me)\b",
    re.IGNORECASE,
)
_NO_ANSWER = re.compile(
    r"\b(?:not?|none|nothing|never|unknown|cannot|can't|don't|doesn't|didn't|isn't|aren't|unclear|unsure)\b|n't\b",
    re.IGNORECASE,
)
"""Words of an answer that says the notes do not answer ("The notes do not say where your sister lives")."""
CITATION = '\n\n(From my notes of our earlier conversations: "{note}")'
NOT_ANSWERED_NOTE = """
(These notes were checked: none of them says what I ask now, so do not answer with them. If you
cannot answer another way, say that you do not know.)"""


@dataclass(frozen=True)
class NoteCheck:
    """What the check of the notes found: `answer`, the turn's answer from a note; or
    `unanswered`, the model checked them and none states what the question asks; neither when
    there was no check or no valid answer."""

    answer: AIMessage | None = None
    unanswered: bool = False


class NoteAnswer(BaseModel):
    """Whether the notes answer the user's question, and the answer."""

    answered: bool = Field(description="true only when a note states what the question asks")
    answer: str = Field(
        description="the answer to the user, addressed as 'you', from the notes; empty when answered is false"
    )
    note: int = Field(
        default=1, description="the number of the note the answer comes from (1 is the first); 0 when none"
    )


def is_question(text: str) -> bool:
    """Whether a user message asks something (ends with "?" or starts with a question word): only
    a question is checked against the notes; a request about a memory ("Forget that I live in
    Lisbon", "Remember my new address") needs its tools whatever the notes say."""
    return bool(_QUESTION.search(text.strip()))


def gives_answer(value: NoteAnswer, count: int) -> bool:
    """Whether `value` holds an answer taken from one of `count` notes: a valid note number and an
    answer that does not say the notes are silent."""
    answer = value.answer.strip()
    return bool(answer) and 1 <= value.note <= count and not _NO_ANSWER.search(answer)


def _checked(notes: Sequence[str]) -> Callable[[NoteAnswer], NoteAnswer]:
    def check(value: NoteAnswer) -> NoteAnswer:
        if value.answered and not value.answer.strip():
            raise ValueError("answered is true but the answer is empty")
        if value.answered and not 1 <= value.note <= len(notes):
            raise ValueError(f"note must be the number of a note, 1 to {len(notes)}")
        if not value.answered and gives_answer(value, len(notes)):
            raise ValueError(
                f"answered is false, but the answer {value.answer.strip()!r} comes from note {value.note}: "
                f"set answered to true if note {value.note} states what the question asks, "
                "else leave the answer empty and set note to 0"
            )
        return value

    return check


async def answer_from_notes(
    model: BaseChatModel,
    question: str,
    notes: Sequence[str],
    config: RunnableConfig | None,
    *,
    retries: int,
    timeout: float | None,
    step: int,
) -> NoteCheck:
    """The answer to `question` from `notes` (the turn's recalled memories, most similar
    first), citing the note it came from, or that none answers it (`NoteCheck`)."""
    if not notes or not is_question(question):
        return NoteCheck()
    listed = "\n".join(f"{number}. {note}" for number, note in enumerate(notes, 1))
    prompt: list[AnyMessage] = [
        SystemMessage(with_preamble(NOTE_ANSWER_SYSTEM)),
        HumanMessage(NOTE_ANSWER_PROMPT.format(notes=listed, question=question)),
    ]
    try:
        result = await ainvoke_structured(
            model,
            NoteAnswer,
            prompt,
            config,
            retries=retries,
            timeout=timeout,
            step=step,
            check=_checked(notes),
            tags=["memory_answer"],
        )
    except StructuredOutputError:
        return NoteCheck()
    value: NoteAnswer = result.value
    if not value.answered:
        emit("memory_answer", step=step, answered=False, memory="")
        return NoteCheck(unanswered=True)
    note = notes[value.note - 1]
    emit("memory_answer", step=step, answered=True, memory=note)
    text = value.answer.strip() + CITATION.format(note=note.rstrip("."))
    return NoteCheck(AIMessage(content=text, response_metadata={"memories_used": [note]}))
