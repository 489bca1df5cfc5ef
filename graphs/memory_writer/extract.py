"""Turn a conversation turn into long-term memory: the episodic memories, semantic facts and
profile fields an LLM extracts from it.

Extraction asks for `MemoryExtraction` through the runtime's structured call
(graphs/runtime/structured.py: JSON-schema constrained output on OpenAI-compatible servers,
function calling elsewhere, validated, re-asked once); saving goes through store/memory.py, so
near-duplicates update existing memories instead of piling up. Nothing is written when the model
call or its output validation fails, and the failure says so (event, log, the run's error).

Every memory says who it is about (`about`: "user", or the other person as the user calls them),
and the extraction lists the other people the turn speaks of (`people`) before anything else.
Profile fields are the user's own: a value the user's words give to someone else
(graphs/memory_writer/attribution.py) is not written to the profile but kept as a memory about
that person, whose `subject` records who.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.store.base import BaseStore
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from graphs.memory_writer.attribution import USER, Attribution, attribute_profile, is_user, text_subject
from graphs.memory_writer.grounding import Evidence, in_the_users_voice
from graphs.memory_writer.prompts import EXTRACTION_PROMPT
from graphs.runtime.history import last_turn
from graphs.runtime.structured import ainvoke_structured
from store import memory

MAX_ITEMS = 10
MAX_EXISTING = 20
MAX_TURN_CHARS = 12000
EXTRACTION_ATTEMPTS = 2

CategoryName = Literal[memory.CATEGORIES]  # type: ignore[valid-type]
ProfileField = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=memory.MAX_PROFILE_KEY_CHARS)
]
ProfileValue = Annotated[str, StringConstraints(max_length=memory.MAX_PROFILE_VALUE_CHARS)]
PersonLabel = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
OTHER_PERSON_CATEGORY = "relationship"

logger = logging.getLogger(__name__)


def _every_field_required(schema: dict[str, Any]) -> None:
    """JSON schema hook: list every property as required, in order. A server's constrained output
    then makes the model write each one (an empty list at least) in the schema's order: `people`
    and `about` before the texts, the memories before the profile."""
    schema["required"] = list(schema.get("properties", {}))


ABOUT_DESCRIPTION = (
    'Who it is about: "user" for the user themself, else the other person as the user calls them, '
    'e.g. "<relative> <name>", "<role>".'
)


class EpisodicItem(BaseModel):
    """An event or experience of the user, or of someone in their life, worth remembering."""

    model_config = ConfigDict(json_schema_extra=_every_field_required)

    about: PersonLabel = Field(default=USER, description=ABOUT_DESCRIPTION)
    text: str = Field(
        min_length=1,
        max_length=2000,
        description="One self-contained sentence about what happened, e.g. 'The user <did something> <when>'.",
    )
    importance: float = Field(default=0.5, ge=0, le=1, description="0 trivial .. 1 essential")


class SemanticItem(BaseModel):
    """A durable fact, preference, skill, relationship or goal of the user, or a fact about
    someone in their life."""

    model_config = ConfigDict(json_schema_extra=_every_field_required)

    about: PersonLabel = Field(default=USER, description=ABOUT_DESCRIPTION)
    text: str = Field(
        min_length=1,
        max_length=2000,
        description="One self-contained statement the user made, e.g. 'The user <fact about them>'.",
    )
    category: CategoryName = Field(description="preference, fact, skill, relationship, goal or other")
    importance: float = Field(default=0.5, ge=0, le=1, description="0 trivial .. 1 essential")


class MemoryExtraction(BaseModel):
    """Memories worth keeping from the latest conversation turn (empty lists when none)."""

    model_config = ConfigDict(json_schema_extra=_every_field_required)

    # People first, then facts: the order a model fills them in when its output is constrained.
    people: list[PersonLabel] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Everyone other than the user the turn speaks of, as the user calls them, "
        "e.g. ['<relative> <name>', '<role>']; [] when none.",
    )
    semantic: list[SemanticItem] = Field(default_factory=list, max_length=MAX_ITEMS)
    episodic: list[EpisodicItem] = Field(default_factory=list, max_length=MAX_ITEMS)
    profile_updates: dict[ProfileField, ProfileValue] = Field(
        default_factory=dict,
        description="The user's own stable profile fields their words state in this turn, e.g. "
        "{'name': '<their name>', 'city': '<where they live>', 'occupation': '<their job>'}; never "
        "another person's (those are memories about them), never a value of another field.",
    )


def _render_turn(turn: list[dict]) -> str:
    labels = {"user": "User", "assistant": "Assistant"}
    lines = [f"{labels[m['role']]}: {m['content'].strip()}" for m in turn if m["content"].strip()]
    return "\n".join(lines)[-MAX_TURN_CHARS:]


def _render_existing(existing: Sequence[dict]) -> str:
    lines = []
    for item in existing[:MAX_EXISTING]:
        label = item.get("kind", "memory")
        if item.get("category"):
            label += f"/{item['category']}"
        lines.append(f"- [{label}] {item.get('text', '')}")
    return "\n".join(lines) or "(none)"


async def extract_memories(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    existing: list[dict],
    *,
    retries: int = 2,
    timeout: float | None = None,
) -> MemoryExtraction:
    """Ask the model which memories the latest turn of `messages` holds.

    `existing` are memories already known (dicts with "text", "kind", "category"), shown to the
    model so it does not repeat them. An answer that is not a valid extraction is asked again
    once; then `StructuredOutputError` (with a `structured_output_failed` event and a log line):
    a model that cannot extract is never taken for a turn with nothing to remember.
    """
    conversation = _render_turn(last_turn(messages))
    if not conversation:
        return MemoryExtraction()
    prompt: list[AnyMessage] = [
        SystemMessage(EXTRACTION_PROMPT),
        HumanMessage(f"Known memories:\n{_render_existing(existing)}\n\nLatest conversation turn:\n{conversation}"),
    ]
    result = await ainvoke_structured(
        model, MemoryExtraction, prompt, None, retries=retries, timeout=timeout, attempts=EXTRACTION_ATTEMPTS
    )
    return result.value


async def extract_and_save(
    store: BaseStore,
    user_id: str,
    messages: Sequence[BaseMessage],
    model: BaseChatModel,
    thread_id: str | None,
    *,
    retries: int = 2,
    timeout: float | None = None,
    speaker: str | None = None,
    turn_ids: Sequence[str] = (),
) -> dict:
    """Save what the model extracts from the latest turn of `messages` (dedupe applies), as said
    by `speaker` (the user's name; default their id), each memory with the `subject` it is about
    when that is someone other than the user. Profile fields the turn states of someone else are
    kept out of the profile (graphs/memory_writer/attribution.py) and saved as a memory about them.
    Only what the user's statements in the turn bear out is written
    (graphs/memory_writer/grounding.py): a question, a request, the assistant's words, a copy of
    the prompt's example or a value of another attribute is dropped (and logged). Each memory
    and profile field keeps `turn_ids`, the chat messages of the turn it came from (the save files
    a memory's in the person/attribute index of whom it is about: store/memory/attributes.py).

    The chat messages themselves are recorded when the turn ends
    (graphs/runtime/memory_schedule.py), not here. Returns counts: {"created", "updated",
    "profile_fields", "dropped"}. The model is asked first; if it fails, nothing is written.
    """
    space = memory.open(store, user_id)  # validates user_id before any model call
    asked = next((m["content"] for m in last_turn(messages) if m["role"] == "user" and m["content"].strip()), None)
    existing: list[dict] = []
    if asked is not None:
        for kind in memory.MEMORY_KINDS:
            existing += await space.recall(
                asked[: space.config.max_text_chars], kind, top_k=MAX_EXISTING // 2, record_access=False, turns=False
            )
    extraction = await extract_memories(model, messages, existing, retries=retries, timeout=timeout)
    user_names = [user_id, *([speaker] if speaker else [])]
    abouts = [i.about for i in extraction.episodic] + [i.about for i in extraction.semantic]
    people = [p for p in [*extraction.people, *abouts] if not is_user(p, user_names)]

    def subject(about: str, text: str) -> str | None:
        """Whom a memory is about (None: the user), also when the model marked another
        person's fact as the user's ("The user's sister Ana is ...")."""
        if not is_user(about, user_names):
            return about
        found = text_subject(text, people)
        return None if found is None or found == USER else found

    saves: list[Save] = [
        ("episodic", item.text, None, item.importance, subject(item.about, item.text)) for item in extraction.episodic
    ]
    saves += [
        ("semantic", item.text, item.category, item.importance, subject(item.about, item.text))
        for item in extraction.semantic
    ]
    people += [s for *_, s in saves if s and s not in people]
    user_text = "\n".join(m["content"] for m in last_turn(messages) if m["role"] == "user")
    own, others = attribute_profile(
        extraction.profile_updates, user_text, people, [(s or USER, text) for _, text, _, _, s in saves]
    )
    if others:
        logger.info(
            "memory_writer: %d profile field(s) left out of the profile, the turn states them of someone else: %s",
            len(others),
            ", ".join(sorted(others)),
        )
    saves += _memories_about_others(others, extraction.profile_updates, saves)
    evidence = Evidence.of([m["content"] for m in last_turn(messages) if m["role"] == "user"], prompt_texts())
    # a memory about the user is dropped when the turn's words give it to someone else only
    kept = [s for s in saves if evidence.supports(s[1]) and not (s[4] is None and evidence.someone_elses(s[1], people))]
    dropped = [text for _, text, _, _, _ in saves if not any(text == k[1] for k in kept)]
    dropped += [f"{field}: {value}" for field, value in own.items() if not evidence.supports_field(field, value)]
    saves = kept
    own = {field: value for field, value in own.items() if evidence.supports_field(field, value)}
    if dropped:
        logger.info(
            "memory_writer: %d extracted item(s) not stated by the user in the turn, not saved: %s",
            len(dropped),
            "; ".join(text[:80] for text in dropped),
        )
    limit = space.config.max_text_chars
    saves = [
        (kind, voiced if len(voiced := in_the_users_voice(text)) <= limit else text, category, importance, about)
        for kind, text, category, importance, about in saves
    ]
    if any(not text.strip() or len(text) > limit for _, text, _, _, _ in saves):
        raise ValueError(f"extracted memory text is empty or longer than {limit} characters")

    counts = {"created": 0, "updated": 0, "profile_fields": 0, "dropped": len(dropped)}
    for kind, text, category, importance, about in saves:
        saved = await space.save(
            kind,
            text,
            category=category,
            importance=importance,
            source="extraction",
            thread_id=thread_id,
            speaker=speaker or user_id,
            subject=about,
            turn_ids=list(turn_ids),
        )
        counts[saved["action"]] += 1
    if own:
        await space.update_profile(own, turn_ids=list(turn_ids))
        counts["profile_fields"] = len(own)
    return counts


def prompt_texts() -> list[str]:
    """Every text the writer's model is shown besides the turn: the prompt and the schema's
    descriptions (what an extracted memory must never repeat)."""
    texts = [EXTRACTION_PROMPT]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("description"), str):
                texts.append(node["description"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(MemoryExtraction.model_json_schema())
    return texts


Save = tuple[str, str, str | None, float, str | None]
"""(kind, text, category, importance, subject) of one memory to save."""

QUOTE_CHARS = 500
_DETERMINERS = ("the ", "a ", "an ", "another ", "his ", "her ", "their ")


def _their(about: str) -> str:
    """How a memory text names a person: "sister Ana" -> "their sister Ana", "my boss" -> "their
    boss", "Tom" and "the user's sister" as they are."""
    if about.casefold().startswith(("my ", "our ")):
        return "their " + about.split(" ", 1)[1]
    if about[:1].islower() and not about.casefold().startswith(_DETERMINERS):
        return "their " + about
    return about


def _memories_about_others(others: dict[str, Attribution], values: dict[str, str], saves: list[Save]) -> list[Save]:
    """A semantic memory about the person each of `others` (profile fields the turn states of
    someone else) belongs to, quoting the user's sentence; none when a memory about someone else
    already holds the value (the model's own, or one added for another field of that sentence)."""
    added: list[Save] = []
    for field, attribution in others.items():
        if attribution.sentence is None:
            continue  # judged from the extraction's memories about them: already there
        value = values[field].casefold()
        if any(about is not None and value in text.casefold() for _, text, _, _, about in [*saves, *added]):
            continue
        text = f'The user said about {_their(attribution.about)}: "{attribution.sentence[:QUOTE_CHARS]}"'
        added.append(("semantic", text, OTHER_PERSON_CATEGORY, 0.5, attribution.about))
    return added
