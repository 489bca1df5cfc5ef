"""Writes: save with dedupe, chat messages, the profile, deletes and forgetting a user. Chat
messages and the memories learnt from them also feed the person/attribute indexes
(store/memory/attributes.py)."""

from __future__ import annotations

import re
import secrets
import threading
import uuid
from datetime import UTC, datetime, timedelta
from difflib import SequenceMatcher
from typing import Any, Literal

from langgraph.store.base import BaseStore, GetOp, Item, PutOp

from store.backend import backend_for
from store.clean import strip_nul
from store.dates import expired, parse_stamp, stamp
from store.memory import attributes, times
from store.memory.config import (
    KINDS,
    MAX_PROFILE_FIELDS,
    MEMORY_KINDS,
    PASSAGES_FIELD,
    PEOPLE_KEY,
    PROFILE_KEY,
    ROLES,
    SOURCES,
    MemoryConfig,
    memory_config,
)
from store.memory.validate import (
    checked_category,
    checked_importance,
    checked_keywords,
    checked_text,
    choice,
    namespace,
    optional_id,
    profile_fields,
    shown,
    user_prefix,
)
from store.people import introductions, learn, vocatives
from store.sentences import exchange, passages

_KEY_CLOCK = threading.Lock()
_last_key = [-1, 0]  # the millisecond of the last id made and its counter


def memory_key(at: datetime) -> str:
    """A new memory's id: a UUID (the version 7 layout of RFC 9562) whose first 48 bits are `at`
    (the write's time, an overridden `now` included) in milliseconds since 1970, the next 12 a
    counter of the ids made one after the other for that same millisecond, the rest random.

    Ids sort as their write times do. Every ranking that breaks a tie by id (fusion, BM25,
    thread neighbours) then orders tied memories by when they were written, so the same
    conversation recorded twice ranks the same way: with random ids (uuid4) each load ordered its
    ties its own way."""
    millis = min(max(int(at.timestamp() * 1000), 0), (1 << 48) - 1)
    with _KEY_CLOCK:
        counter = _last_key[1] + 1 if _last_key[0] == millis else 0
        _last_key[:] = [millis, counter]
    value = millis << 80 | 0x7 << 76 | (counter & 0xFFF) << 64 | 0b10 << 62 | secrets.randbits(62)
    return str(uuid.UUID(int=value))


def ttl_minutes(store: BaseStore, value: dict, config: MemoryConfig) -> float | None:
    """The row TTL (minutes) matching the value's `expires_at`, when the store supports TTL."""
    # The row's expiry follows the value's `expires_at` by the real clock, so a write with an
    # overridden `now` (imports, replays) expires in the store when the value says it does.
    expires = parse_stamp(value.get("expires_at"))
    if not (config.ttl_days and store.supports_ttl and expires):
        return None
    return (expires - times.utc_now()).total_seconds() / 60


def with_expiry(value: dict, config: MemoryConfig, now: datetime) -> dict:
    """`value` with `expires_at` set from MEMORY_TTL_DAYS (unchanged without a TTL)."""
    if config.ttl_days:
        return {**value, "expires_at": stamp(now + timedelta(days=config.ttl_days))}
    return value


def put_op(store: BaseStore, ns: tuple, key: str, value: dict, reindex: bool, config: MemoryConfig) -> PutOp:
    """The PutOp writing `value` (NUL stripped), re-embedding the text only when `reindex`."""
    # index=False keeps the stored vector (Postgres upserts the row only); used when the
    # text did not change.
    index: Literal[False] | list[str] = False
    if reindex:
        index = ["text", f"{PASSAGES_FIELD}[*]"] if value.get(PASSAGES_FIELD) else ["text"]
    return PutOp(ns, key, strip_nul(value), index=index, ttl=ttl_minutes(store, value, config))


async def save_memory(
    store: BaseStore,
    user_id: str,
    kind: str,
    text: str,
    *,
    category: str | None = None,
    importance: float = 0.5,
    source: str = "tool",
    thread_id: str | None = None,
    keywords: list[str] | None = None,
    speaker: str | None = None,
    subject: str | None = None,
    turn_ids: list[str] | None = None,
    now: datetime | None = None,
    config: MemoryConfig | None = None,
) -> dict:
    """Save an episodic or semantic memory, or update a near-duplicate of it (`config`: the
    settings, default the MEMORY_* variables).

    An existing memory of the same kind (and category) whose similarity to `text` is at least
    MEMORY_DEDUPE_THRESHOLD is updated instead: text replaced, importance = max(old, new),
    `updated_at` bumped. Never a duplicate: a memory of another `speaker` (who said it, when a
    conversation has several people; stored in the value) or about another `subject` (who the
    memory is about when that is not the user, e.g. "sister Ana"; stored in the value; None: the
    user), nor, for episodic memories (events),
    one created on another UTC day than `now` or whose text is not a near-exact repeat of `text`
    (`near_exact`: two different things said the same day stay two memories, however similar
    their vectors). `turn_ids` are the chat messages the memory was learnt from (stored in the
    value; an update adds them to the memory's earlier ones); the aspect words of its text
    (store/aspects.py: "Jo took up pottery" -> activity `pottery`) file them in the
    person/attribute index of whom it is about, the `subject` as a recorded speaker or else the
    `speaker` of those messages (store/memory/attributes.py), so that a list question finds them.
    Returns the memory with `"action": "created" | "updated"`
    (an update also carries `similarity` and `previous_text`). `now` overrides the clock for
    imports and replays.
    """
    config = config or memory_config()
    ns = namespace(user_id, choice(kind, MEMORY_KINDS, "kind"))
    text = checked_text(text, config)
    category = checked_category(kind, category)
    importance = checked_importance(importance)
    source = choice(source, SOURCES, "source")
    thread_id = optional_id(thread_id, "thread_id")
    keywords = checked_keywords(keywords) if keywords else None
    speaker = optional_id(speaker, "speaker")
    subject = optional_id(subject.strip() if isinstance(subject, str) else subject, "subject")
    turns = checked_turn_ids(turn_ids)
    now = now or times.utc_now()
    written = stamp(now)

    hits = await store.asearch(
        ns,
        query=text,
        filter={"category": category} if category else None,
        limit=5,
        refresh_ttl=False,
    )
    duplicate = next(
        (
            h
            for h in hits
            if not expired(h.value, now)
            and (h.score or 0) >= config.dedupe_threshold
            and same_source(h.value, kind, speaker, now)
            and h.value.get("subject") == subject
            and (kind != "episodic" or near_exact(str(h.value.get("text", "")), text))
        ),
        None,
    )
    if duplicate:
        old = duplicate.value
        value = {
            **old,
            "text": text,
            "importance": max(float(old.get("importance", 0)), importance),
            "updated_at": written,
            "source": source,
        }
        if thread_id:
            value["thread_id"] = thread_id
        if speaker:
            value["speaker"] = speaker
        if keywords:
            value["keywords"] = list(dict.fromkeys([*(old.get("keywords") or []), *keywords]))
        if turns:
            value["turn_ids"] = list(dict.fromkeys([*(old.get("turn_ids") or []), *turns]))[-MAX_TURN_IDS:]
        value = with_expiry(value, config, now)
        reindex = text != old.get("text")
        await store.abatch([put_op(store, ns, duplicate.key, value, reindex, config)])
        if reindex:
            await backend_for(store).index_memory(ns, duplicate.key, text, speaker)
        await _learn_aspects(store, user_id, value)
        return {
            "id": duplicate.key,
            **value,
            "action": "updated",
            "similarity": duplicate.score,
            "previous_text": old.get("text"),
        }

    value = {
        "text": text,
        "kind": kind,
        **({"category": category} if category else {}),
        "importance": importance,
        "created_at": written,
        "updated_at": written,
        "last_accessed_at": None,
        "access_count": 0,
        "source": source,
        **({"thread_id": thread_id} if thread_id else {}),
        **({"keywords": keywords} if keywords else {}),
        **({"speaker": speaker} if speaker else {}),
        **({"subject": subject} if subject else {}),
        **({"turn_ids": turns} if turns else {}),
    }
    value = with_expiry(value, config, now)
    key = memory_key(now)
    await store.abatch([put_op(store, ns, key, value, True, config)])
    await backend_for(store).index_memory(ns, key, value["text"], speaker)
    await _learn_aspects(store, user_id, value)
    return {"id": key, **value, "action": "created"}


async def _learn_aspects(store: BaseStore, user_id: str, value: dict) -> None:
    """Fold a saved memory learnt from chat messages (`turn_ids`) into the person/attribute index
    of whom it is about (store/memory/attributes.py `learn_memory`; nothing to do without turn
    ids or an aspect word in its text)."""
    if value.get("turn_ids"):
        await attributes.learn_memory(
            store,
            namespace(user_id, "chat"),
            str(value["text"]),
            value["turn_ids"],
            value.get("speaker"),
            value.get("subject"),
        )


MAX_TURN_IDS = 20  # the latest chat messages a memory keeps as where it came from


def checked_turn_ids(turn_ids: Any) -> list[str]:
    """Distinct chat message ids (at most MAX_TURN_IDS), or ValueError."""
    if turn_ids is None:
        return []
    if isinstance(turn_ids, str) or not isinstance(turn_ids, (list, tuple)):
        raise ValueError("turn_ids must be a list of chat message ids")
    return list(dict.fromkeys(str(optional_id(i, "turn_ids item")) for i in turn_ids))[-MAX_TURN_IDS:]


NEAR_EXACT_RATIO = 0.9  # character similarity of two texts that say the same thing in the same words


def _normalised(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def near_exact(old: str, new: str) -> bool:
    """Whether `new` repeats `old` in (nearly) the same words: equal after case, punctuation and
    spacing are ignored, or at least NEAR_EXACT_RATIO alike character by character ("The user
    lives in Berlin." / "the user lives in Berlin"; not "Thanks! This has been great for my mental
    health." / "Thanks! Mental health is important to me.")."""
    a, b = _normalised(old), _normalised(new)
    return a == b or SequenceMatcher(None, a, b, autojunk=False).ratio() >= NEAR_EXACT_RATIO


def same_source(old: dict, kind: str, speaker: str | None, now: datetime) -> bool:
    """Whether a near-duplicate `old` may be merged with a new memory: same speaker (both None
    counts as the same; a semantic fact saved without one matches any), and for episodic
    memories created on the same UTC day as `now`."""
    if old.get("speaker") != speaker and not (kind == "semantic" and old.get("speaker") is None):
        # a fact saved without a speaker (before writes recorded one) is the user's own
        return False
    if kind != "episodic":
        return True
    created = parse_stamp(old.get("created_at"))
    return created is not None and created.astimezone(UTC).date() == now.astimezone(UTC).date()


async def record_chat_message(
    store: BaseStore,
    user_id: str,
    role: str,
    text: str,
    thread_id: str | None,
    *,
    speaker: str | None = None,
    now: datetime | None = None,
    config: MemoryConfig | None = None,
) -> dict:
    """Append one raw chat message to the user's history (no dedupe). `speaker` names who wrote
    it when a conversation has several people (stored in the value; hybrid recall boosts the
    messages of a speaker its query names). A message of several sentences also keeps them as
    `passages` (store/sentences.py), each embedded beside the whole text, so vector search finds
    it by its best sentence; a reply to a question (the message before it in `thread_id`, by
    someone else, asks one) keeps that question and itself as one more passage
    (`store.sentences.exchange`), so it is found by the words it answers; reads leave them out.

    Text longer than MEMORY_MAX_TEXT_CHARS is cut to that length and marked `"truncated": true`
    (a chat log keeps what it can rather than refusing the turn).
    """
    config = config or memory_config()
    ns = namespace(user_id, "chat")
    role = choice(role, ROLES, "role")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text must be a non-empty string")
    thread_id = optional_id(thread_id, "thread_id")
    speaker = optional_id(speaker, "speaker")
    truncated = len(text) > config.max_text_chars
    now = now or times.utc_now()
    written = stamp(now)
    value: dict[str, Any] = {
        "text": text[: config.max_text_chars].strip(),
        "kind": "chat",
        "role": role,
        "importance": 0.5,
        "created_at": written,
        "updated_at": written,
        "last_accessed_at": None,
        "access_count": 0,
        "source": "chat",
        **({"thread_id": thread_id} if thread_id else {}),
        **({"truncated": True} if truncated else {}),
        **({"speaker": speaker} if speaker else {}),
    }
    asked = await backend_for(store).thread_last(ns, thread_id, written) if thread_id else None
    found = _message_passages(str(value["text"]), speaker, speaker or role, asked)
    if found:
        value[PASSAGES_FIELD] = found
    value = with_expiry(value, config, now)
    key = memory_key(now)
    await store.abatch([put_op(store, ns, key, value, True, config)])
    await backend_for(store).index_memory(ns, key, str(value["text"]), speaker)
    await _learn_people(store, ns, speaker, str(value["text"]))
    await attributes.learn_turn(store, ns, speaker, key, str(value["text"]))
    return {"id": key, **shown(value)}


def _message_passages(text: str, speaker: str | None, author: str, asked: Item | None) -> list[str]:
    """The passages a chat message keeps (store/sentences.py): its sentences and, when `asked`
    (the message before it in its thread) was written by someone else and asks a question, the
    exchange of that question and this reply (`store.sentences.exchange`)."""
    found = passages(text, speaker)
    if asked is not None:
        asker = str(asked.value.get("speaker") or asked.value.get("role") or "")
        if answered := exchange(str(asked.value.get("text") or ""), asker, text, author):
            found.append(answered)
    return found


async def _chat_items(store: BaseStore, user_id: str) -> list:
    """Every message of the user's chat history, in the order they were written."""
    items = await backend_for(store).scan(namespace(user_id, "chat"))
    items.sort(key=lambda item: (str(item.value.get("created_at") or ""), item.key))  # ids: write order
    return items


async def _memory_items(store: BaseStore, user_id: str) -> list:
    """Every episodic and semantic memory of the user."""
    items = []
    for kind in MEMORY_KINDS:
        items += await backend_for(store).scan(namespace(user_id, kind))
    return items


async def rebuild_passages(store: BaseStore, user_id: str, *, config: MemoryConfig | None = None) -> int:
    """The passages of the user's chat messages written anew, as `record_chat_message` writes
    them: each message's sentences and, for a reply to a question, that question and the reply
    (for messages recorded before they were kept); only the messages missing one are written and
    embedded again (their TTL kept; a passage kept stays, though the question it holds may have
    expired since). Returns how many. Run it while nothing records that user's messages."""
    config = config or memory_config()
    ns = namespace(user_id, "chat")
    before: dict[str, Item] = {}  # thread -> the message written last so far
    ops: list[PutOp] = []
    for item in await _chat_items(store, user_id):
        value, thread = item.value, item.value.get("thread_id")
        author = str(value.get("speaker") or value.get("role") or "")
        found = _message_passages(str(value.get("text") or ""), value.get("speaker"), author, before.get(thread or ""))
        if thread:
            before[thread] = item
        kept = [str(passage) for passage in value.get(PASSAGES_FIELD) or []]
        if not set(found) <= set(kept):  # one missing (a passage kept stays: its question may have expired)
            written = found + [passage for passage in kept if passage not in found]
            ops.append(put_op(store, ns, item.key, {**value, PASSAGES_FIELD: written}, True, config))
    for start in range(0, len(ops), 64):
        await store.abatch(ops[start : start + 64])
    return len(ops)


async def rebuild_aspects(store: BaseStore, user_id: str) -> dict[str, dict]:
    """Each speaker's person/attribute index built anew from the user's chat history and the
    memories learnt from it (those with `turn_ids`), in the order they were written (for histories
    recorded before the index existed; store/memory/attributes.py); returns them (speaker ->
    index)."""
    chat = await _chat_items(store, user_id)
    return await attributes.rebuild(store, namespace(user_id, "chat"), chat, await _memory_items(store, user_id))


async def _learn_people(store: BaseStore, ns: tuple, speaker: str | None, text: str) -> None:
    """Fold a chat message into the memory space's registry of people (store/people.py): only a
    message that introduces its writer or addresses someone by name costs a read of who speaks
    and an update of the registry (`Backend.update_items`: concurrent ones never undo it)."""
    if not speaker or not (introductions(text) or vocatives(text)):
        return
    backend = backend_for(store)
    speakers = await backend.speakers(ns) | {speaker}

    def change(_key: str, current: dict | None) -> dict | None:
        registry = dict(current) if current else {"kind": "people"}
        return registry if learn(registry, speaker, text, speakers) else None

    await backend.update_items((*ns[:-1], "profile"), [PEOPLE_KEY], change)


async def rebuild_people(store: BaseStore, user_id: str) -> dict:
    """The registry of people of the user's chat history, built anew from every message in the
    order they were written (for histories recorded before the registry existed); returns it.
    Each message is learnt with the speakers recorded up to it, as `record_chat_message` learnt
    it: the registry rebuilt is the one recorded (a message addressing someone before they
    spoke counts in neither)."""
    items = await _chat_items(store, user_id)
    speakers: set[str] = set()
    registry: dict = {"kind": "people"}
    for item in items:
        if item.value.get("speaker"):
            speakers.add(str(item.value["speaker"]))
        learn(registry, item.value.get("speaker"), str(item.value.get("text") or ""), speakers)
    await store.aput(namespace(user_id, "profile"), PEOPLE_KEY, registry, index=False)
    return registry


async def update_profile(
    store: BaseStore,
    user_id: str,
    fields: dict,
    *,
    turn_ids: list[str] | None = None,
    now: datetime | None = None,
    config: MemoryConfig | None = None,
) -> dict:
    """Merge `fields` into the user's profile (a value None removes that field); returns it.
    `turn_ids`: the chat messages the fields were learnt from, kept per field (`field_turns`).
    A read-modify-write that concurrent updates never undo (`Backend.update_items`): the memory
    writer and the turn's own profile tool may update one profile at the same time."""
    config = config or memory_config()
    ns = namespace(user_id, "profile")
    changes = profile_fields(fields)
    turns = checked_turn_ids(turn_ids)
    now = now or times.utc_now()
    written = stamp(now)

    def change(_key: str, current: dict | None) -> dict:
        old = current if current and not expired(current, now) else {}
        merged = {**(old.get("fields") or {}), **changes}
        merged = {name: value for name, value in merged.items() if value is not None}
        if len(merged) > MAX_PROFILE_FIELDS:
            raise ValueError(f"a profile holds at most {MAX_PROFILE_FIELDS} fields")
        field_turns = {name: ids for name, ids in (old.get("field_turns") or {}).items() if name in merged}
        for name in changes:
            field_turns.pop(name, None)
            if turns and name in merged:
                field_turns[name] = turns
        value = {
            "text": "; ".join(f"{name}: {text}" for name, text in merged.items()),
            "kind": "profile",
            "fields": merged,
            "importance": 1.0,
            "created_at": old.get("created_at") or written,
            "updated_at": written,
            "last_accessed_at": old.get("last_accessed_at"),
            "access_count": old.get("access_count", 0),
            "source": "tool",
            **({"field_turns": field_turns} if field_turns else {}),
        }
        return strip_nul(with_expiry(value, config, now))

    ttl = ttl_minutes(store, with_expiry({}, config, now), config)
    value = (await backend_for(store).update_items(ns, [PROFILE_KEY], change, ttl))[PROFILE_KEY]
    return {"id": PROFILE_KEY, **value, "score": None}


async def delete_memory(store: BaseStore, user_id: str, memory_id: str) -> dict:
    """Delete one memory of this user by id (any kind). Never touches another user's items.

    Returns `{"id", "deleted": bool, "kind"}` (`kind` None when nothing was found).
    """
    labels = [namespace(user_id, kind) for kind in KINDS]
    checked_id = optional_id(memory_id, "memory_id")
    if checked_id is None:
        raise ValueError("memory_id must be a non-empty string")
    found = await store.abatch([GetOp(ns, checked_id, False) for ns in labels])
    for ns, item in zip(labels, found, strict=True):
        if item is not None:
            await store.adelete(ns, checked_id)
            await backend_for(store).unindex_memory(ns, checked_id)
            return {"id": checked_id, "deleted": True, "kind": ns[2]}
    return {"id": checked_id, "deleted": False, "kind": None}


async def forget_user(store: BaseStore, user_id: str) -> int:
    """Delete every memory, profile and chat message of the user; returns how many items."""
    return await backend_for(store).delete_under(user_prefix(user_id))
