"""What the agent remembers about the user, put in the prompt before a turn's first model call.

A question about the user ("What is my dog's name?") is answered from memories saved in other
conversations only if the model thinks of searching them, and a small model often calls another
tool instead (web search). So before a turn's first model call the run's user's memories close in
meaning to the latest message are recalled and shown with it:

- semantic and episodic memories (store/memory `recall`, without counting it as an access);
- the user's own chat messages from other conversations (this conversation is in the prompt
  already; the assistant's answers are not evidence of what the user said);
- profile fields (`key: value`) close to the message.

Memories are written about the user in the third person ("The user lives in Lisbon"), and the
user asks in the first person ("Which city do I live in?"): the two are compared with the message
turned to the third person (`about_the_user`: "Which city does the user live in?"), which brings a
memory that answers the question from a similarity of 0.29-0.39 to 0.5-0.75 with the local
embedder, while unrelated messages stay under 0.3. The user's own chat messages are compared
with the message as written.

Only items at least `MIN_SIMILARITY` similar to the message are shown, at most `top_k` of them,
most similar first, within a token budget (`max_tokens`, context `recall_max_tokens`: a long
chat message is cut); a message unrelated to anything stored gets no note. Only the run's user's
namespace is read. A failing store or embedder costs the note, never the turn (logged).

A memory very close to the message (`Recalled.best`) lets the turn first ask, without tools,
whether the recalled memories answer it (graphs/runtime/memory_answer.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np
from langgraph.store.base import BaseStore

from graphs.runtime.tool_offer import stored_kinds
from store import memory
from store.embeddings import get_embeddings

logger = logging.getLogger(__name__)

MIN_SIMILARITY = 0.35
"""Least cosine similarity (of the local embedder's vectors) between the message and a memory
for the memory to be shown: a memory that answers a question about it scores 0.5-0.6, unrelated
ones under 0.2."""
RECALLED_KINDS = ("semantic", "episodic", "chat")
CHARS_PER_TOKEN = 4
MIN_ITEM_CHARS = 40
"""Less room than this left in the note's budget: no further item (a cut-off stump misleads)."""
MAX_PROFILE_FIELDS = 50
_FIRST_PERSON = [
    (re.compile(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        (r"\bI am\b|\bI'm\b", "the user is"),
        (r"\bam I\b", "is the user"),
        (r"\bdo I\b", "does the user"),
        (r"\bhave I\b", "has the user"),
        (r"\bI've\b", "the user has"),
        (r"\bmy\b|\bmine\b", "the user's"),
        (r"\bI\b|\bme\b|\bmyself\b", "the user"),
    )
]
RECALL_NOTE = """

What you already know about me (notes from earlier conversations; "the user" is me):
{items}
If these notes answer my question, answer from them directly, without calling a tool."""


def about_the_user(message: str) -> str:
    """`message` with the user's first person turned to the third, as memories are written:
    "Which city do I live in?" -> "Which city does the user live in?"."""
    for pattern, replacement in _FIRST_PERSON:
        message = pattern.sub(replacement, message)
    return message


async def _profile_matches(store: BaseStore, user_id: str, message: str) -> list[tuple[float, str]]:
    fields = (await memory.get_profile(store, user_id, categories=[])).get("fields") or {}
    texts = [f"{key}: {value}" for key, value in list(fields.items())[:MAX_PROFILE_FIELDS] if value]
    if not texts:
        return []
    readable = [text.replace("_", " ") for text in texts]
    vectors = np.asarray(await get_embeddings().aembed_documents([message, *readable]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-9)
    return [(float(vectors[0] @ vector), text) for vector, text in zip(vectors[1:], texts, strict=True)]


async def recall_items(
    store: BaseStore, user_id: str, message: str, *, top_k: int, thread_id: str | None = None
) -> list[str]:
    """The texts of at most `top_k` of `user_id`'s memories close to `message` (see the module
    docstring), most similar first; `thread_id` is the conversation the message belongs to."""
    return [text for _, text, _ in await recall_scored(store, user_id, message, top_k=top_k, thread_id=thread_id)]


async def recall_scored(
    store: BaseStore, user_id: str, message: str, *, top_k: int, thread_id: str | None = None
) -> list[tuple[float, str, str]]:
    """`recall_items` with each text's similarity to the message and its kind (`semantic`,
    `episodic`, `chat`, `profile`): `(similarity, text, kind)`."""
    if top_k <= 0 or not message.strip():
        return []
    space = memory.open(store, user_id)
    kinds = await stored_kinds(store, user_id)
    about = about_the_user(message)
    scored: list[tuple[float, str, str]] = []
    for kind in RECALLED_KINDS:
        if kind not in kinds:
            continue
        query = message if kind == "chat" else about  # the user's own messages speak in the first person
        for hit in await space.recall(query, kind, top_k=top_k, record_access=False, turns=False):
            if kind == "chat" and (hit.get("role") != "user" or (thread_id and hit.get("thread_id") == thread_id)):
                continue
            # a message sent in parts: all of it (its similarity is its best part's)
            text = " ".join(str(part.get("text", "")) for part in hit["parts"]) if hit.get("parts") else hit.get("text")
            scored.append((float(hit.get("similarity") or 0.0), str(text or "").strip(), kind))
    if "profile" in kinds:
        scored += [(similarity, text, "profile") for similarity, text in await _profile_matches(store, user_id, about)]
    scored.sort(key=lambda item: -item[0])
    kept: dict[str, tuple[float, str]] = {}
    for similarity, text, kind in scored:
        if similarity >= MIN_SIMILARITY and text:
            kept.setdefault(text, (similarity, kind))
    return [(similarity, text, kind) for text, (similarity, kind) in kept.items()][:top_k]


def fit_items(items: list[str], max_tokens: int) -> list[str]:
    """`items` (most similar first), spaces collapsed, within `max_tokens` together (about
    CHARS_PER_TOKEN characters a token): each takes what it needs of what is left, a longer one
    is cut at a word with "…", and none is kept once less than a short sentence is left."""
    left = max_tokens * CHARS_PER_TOKEN
    kept = []
    for item in items:
        text = " ".join(item.split())
        if left < MIN_ITEM_CHARS:
            break
        if len(text) > left:
            text = text[: left - 1].rsplit(" ", 1)[0] + "…"
        kept.append(text)
        left -= len(text)
    return kept


@dataclass(frozen=True)
class Recalled:
    """What a turn recalled: the note for the prompt (`RECALL_NOTE`, "" when nothing is close),
    its items' texts and the highest similarity among the saved memories and profile fields
    among them (0.0 when none; the user's chat messages do not count: a message of another
    conversation much like this one, "Hello!" or the same question asked again, answers
    nothing)."""

    note: str = ""
    items: tuple[str, ...] = ()
    best: float = 0.0


async def recall_for_turn(
    store: BaseStore | None,
    user_id: str,
    message: str,
    *,
    top_k: int,
    thread_id: str | None = None,
    max_tokens: int = 300,
) -> Recalled:
    """The turn's recalled memories (`Recalled`); its items fit `max_tokens` (`fit_items`), so
    the prompt stays bounded however long the user's memories and messages are."""
    if store is None or top_k <= 0 or max_tokens <= 0:
        return Recalled()
    try:
        scored = await recall_scored(store, user_id, message, top_k=top_k, thread_id=thread_id)
    except Exception as exc:  # the note is a help: a failing store or embedder must not end the turn
        logger.warning("memory recall for the prompt failed: %s", str(exc) or type(exc).__name__)
        return Recalled()
    items = fit_items([text for _, text, _ in scored], max_tokens)
    if not items:
        return Recalled()
    note = RECALL_NOTE.format(items="\n".join(f"- {text}" for text in items))
    saved = [similarity for similarity, _, kind in scored if kind != "chat"]
    return Recalled(note=note, items=tuple(items), best=max(saved, default=0.0))
